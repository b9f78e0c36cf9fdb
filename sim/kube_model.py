"""The in-memory cluster's records beside the API objects (``sim.kube_cluster``): what happened to pods (the
benchmark's counters), Deployments, what a PodDisruptionBudget's status is computed from, and each pod's
bookkeeping."""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agent.kube.views import PodView
from sim.kernel import Timer
from sim.kube_objects import Budget

DEFAULT_GRACE = 30  # spec.terminationGracePeriodSeconds when unset (core/v1 PodSpec)

Alike = tuple[str, str, frozenset[tuple[str, str]]]  # (controller, namespace, labels): ``sim.kube_cluster.alike``


@dataclass
class Counters:
    """What happened to workload pods (DaemonSet pods are not counted)."""

    created: int = 0
    stopped_by_eviction: int = 0  # an accepted eviction started the pod's graceful shutdown
    stopped_by_delete: int = 0  # a DELETE did (a drain past a budget, an operator)
    killed_by_reclaim: int = 0  # running when its node went away
    cut_short: int = 0  # still terminating when its node went away
    evictions_refused: int = 0  # 429 from a PodDisruptionBudget


@dataclass
class Deployment:
    namespace: str
    name: str
    replicas: int
    labels: dict[str, str]
    grace: int | None
    made: int = 0
    pods: dict[str, None] = field(default_factory=dict)
    active: dict[str, None] = field(default_factory=dict)  # its pods not being deleted


@dataclass
class BudgetCounts:
    """What a PodDisruptionBudget's status is computed from, kept up to date as its pods change."""

    healthy: int = 0  # selected pods bound, Ready and not being deleted
    deploys: dict[str, int] = field(default_factory=dict)  # selected pods per owning Deployment
    others: int = 0  # selected pods no Deployment owns


@dataclass(slots=True)
class PodInfo:
    """A pod's API object and the cluster's bookkeeping beside it."""

    obj: dict[str, Any]
    owner: str = ""  # "deploy:<ns>/<name>", "ds:<ns>/<name>" or ""
    budgets: list[str] = field(default_factory=list)
    timer: Timer | None = None
    gone_at: float | None = None  # when its graceful deletion ends
    view: PodView | None = None  # the object as the agent's views parse it, since its last change (bound pods)
    healthy: bool = False  # bound, Ready and not being deleted (what a budget counts)
    refused_by_budget: bool = False  # an eviction of it refused by a PodDisruptionBudget (429, or 500 for two budgets)

    @property
    def key(self) -> str:
        meta = self.obj["metadata"]
        return f"{meta['namespace']}/{meta['name']}"

    @property
    def node(self) -> str:
        return str(self.obj["spec"].get("nodeName") or "")

    @property
    def terminating(self) -> bool:
        return "deletionTimestamp" in self.obj["metadata"]

    @property
    def workload(self) -> bool:
        return not self.owner.startswith("ds:")


class Room:
    """The scheduler's choices (``sim.kube_cluster.Cluster._schedule``): the schedulable nodes with fewer than
    ``cap`` pods bound, as a heap of (pods bound, node name) entries. An entry is pushed whenever a node's pods or its
    schedulability change (``note``) and checked against both when it comes to the top (``take``: one no longer true
    is dropped); the heap is made anew from the nodes when it holds over 64 entries more than twice their number. So
    the least true entry is always the node a look at every schedulable node picks (fewest pods, then name), found at
    the cost of the changes since, not of the cluster's size. ``by_node`` and ``schedulable`` are the cluster's own
    maps."""

    __slots__ = ("by_node", "cap", "heap", "schedulable")

    def __init__(self, by_node: dict[str, dict[str, None]], schedulable: dict[str, None], cap: int) -> None:
        self.by_node, self.schedulable, self.cap = by_node, schedulable, cap
        self.heap: list[tuple[int, str]] = []

    def note(self, node: str) -> None:
        """``node``'s pods or its schedulability changed: its entry, if it is schedulable with room."""
        if node in self.schedulable and (load := len(self.by_node[node])) < self.cap:
            if len(self.heap) > 2 * len(self.schedulable) + 64:  # mostly entries no longer true
                self.heap = [(n, name) for name in self.schedulable if (n := len(self.by_node[name])) < self.cap]
                heapq.heapify(self.heap)  # this node's entry among them
            else:
                heapq.heappush(self.heap, (load, node))

    def take(self) -> str | None:
        """The schedulable node with the fewest pods (then the least name) below ``cap``, its entry taken (a bind
        notes the node again); None when no node has room."""
        heap, by_node, schedulable = self.heap, self.by_node, self.schedulable
        while heap:
            load, node = heapq.heappop(heap)
            if node in schedulable and len(by_node[node]) == load:  # true now (pushed below ``cap``)
                return node
        return None


class BudgetIndex:
    """Which budgets may select a pod, and which groups of alike pods (``Alike``) a budget may select: each budget
    filed under its namespace and the least pair of its ``matchLabels`` (it selects only pods carrying that pair), or
    under its namespace alone when its selector is empty (it selects every pod there); each group under its namespace
    and every label pair its pods carry. The candidates are then judged by ``selects`` as before, so what is selected
    is what a look at every budget or every group selects, in the budgets' order; the cost is the candidates', not
    the budgets' or the groups' number (a world of 400 Deployments and 200 budgets matched them 80,000 times)."""

    def __init__(self) -> None:
        self._order: dict[str, int] = {}  # budget key -> its place among the cluster's budgets (a dict's order)
        self._filed: dict[str, tuple[str, ...]] = {}  # budget key -> where it is filed
        self._budgets: dict[tuple[str, ...], list[str]] = {}
        self._groups: dict[tuple[str, ...], list[Alike]] = {}

    def add_budget(self, key: str, budget: Budget) -> None:
        """``key`` made or made again as ``budget`` (its place among the budgets kept, as a dict keeps it)."""
        pair = min(budget.selector.items()) if budget.selector else ()
        old, self._filed[key] = self._filed.get(key), (budget.namespace, *pair)
        if old is not None:
            self._budgets[old].remove(key)
        self._order.setdefault(key, len(self._order))
        self._budgets.setdefault(self._filed[key], []).append(key)

    def budgets_for(self, namespace: str, labels: Mapping[str, str]) -> list[str]:
        """The budgets that may select a pod of ``namespace`` with ``labels``, in the budgets' order."""
        found = [*self._budgets.get((namespace,), ())]
        for pair in labels.items():
            found.extend(self._budgets.get((namespace, *pair), ()))
        return sorted(found, key=self._order.__getitem__) if len(found) > 1 else found

    def group_of(self, groups: dict[Alike, dict[str, Any]], key: Alike) -> dict[str, Any]:
        """``groups[key]``, made and filed when new."""
        group = groups.get(key)
        if group is None:
            group = groups[key] = {}
            _, namespace, labels = key
            for place in ((namespace,), *((namespace, *pair) for pair in labels)):
                self._groups.setdefault(place, []).append(key)
        return group

    def groups_for(self, key: str) -> list[Alike]:
        """The groups the budget ``key`` may select (in the order they were made)."""
        return self._groups.get(self._filed[key], [])
