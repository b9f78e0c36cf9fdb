"""The in-memory Kubernetes cluster's state, scheduler and pod termination on simulated time (the controllers are in
``sim.kube_workloads``, the API surface in ``sim.kube``).

What it models, and the Kubernetes documentation each part follows:

- Nodes (core/v1 Node): ``spec.providerID`` ``aws:///<az>/<instance-id>``, labels (control-plane role, kOps instance
  group), ``spec.unschedulable``, annotations, the ``Ready`` condition. A node goes away when its instance
  terminates (``remove_node``): every pod on it ends with it ("Node shutdowns":
  https://kubernetes.io/docs/concepts/cluster-administration/node-shutdown/); a workload pod not already being
  deleted is counted ``killed_by_reclaim``.
- Pods: created Pending by their controller, bound by a simple scheduler to a Ready, schedulable, non-control-plane
  node with room (fewest pods first, then name: deterministic), Running at once and Ready ``pod_ready_seconds``
  later. Deletion is graceful ("Pod Lifecycle - Termination of Pods":
  https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-termination): ``metadata.deletionTimestamp``
  is set, the pod stays (terminating, not healthy) for its grace period, then disappears; a pod never bound, a
  finished one, or a grace of 0 goes at once; a later delete with a shorter grace shortens it.
- Deployments as ReplicaSets (https://kubernetes.io/docs/concepts/workloads/controllers/replicaset/): a replica
  count; a pod being deleted no longer counts, so its replacement is created at once (Pending until scheduled).
  DaemonSets: one pod per node, never scheduled elsewhere.
- PodDisruptionBudgets (https://kubernetes.io/docs/concepts/workloads/pods/disruptions/): ``disruptionsAllowed``
  computed live from the Ready, not-terminating pods the budget selects (the real disruption controller computes
  it asynchronously; the eviction's own decrement of the status makes the two agree for back-to-back evictions).
- Accounting for the availability benchmark: ``counters`` (pods stopped by an eviction or a delete vs killed by a
  reclaim) and ``unschedulable_pod_seconds`` (pending workload pods integrated over simulated time).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from agent.kube.views import NodeEvent, NodeView, PodEvent, PodView
from sim.faults import Faults
from sim.kernel import Kernel, Timer
from sim.kube_model import DEFAULT_GRACE, Alike, BudgetCounts, BudgetIndex, Counters, Deployment, PodInfo, Room
from sim.kube_objects import (
    CONTROL_PLANE_LABEL,
    INSTANCE_GROUP_LABEL,
    Budget,
    is_ready,
    node_object,
    pod_object,
    selects,
    set_ready,
    timestamp,
)


def alike(info: PodInfo) -> Alike:
    """(controller, namespace, labels): pods equal in these are selected by the same budgets (``selects``)."""
    meta = info.obj["metadata"]
    return info.owner, meta["namespace"], frozenset((meta.get("labels") or {}).items())


class Cluster:
    """Nodes, pods, controllers and budgets (see the module docstring).

    Args:
        kernel: simulated time and scheduling.
        faults: injected API errors (service ``kube``), optional.
        pod_ready_seconds: from binding to the pod's Ready condition.
        schedule_delay: from a change to the scheduler's pass over the pending pods.
        max_pods_per_node: room of a node (pods bound to it, terminating ones included).
        event_log: watch events kept (an older resourceVersion answers 410 Gone); 0 keeps none (faster: watches
            then see no events; the simulated agent follows pods through ``listeners``, not watches).
    """

    def __init__(
        self,
        kernel: Kernel,
        faults: Faults | None = None,
        *,
        pod_ready_seconds: float = 10.0,
        schedule_delay: float = 1.0,
        max_pods_per_node: int = 30,
        event_log: int = 20000,
    ) -> None:
        self.kernel = kernel
        self.faults = faults
        self.pod_ready_seconds = pod_ready_seconds
        self.schedule_delay = schedule_delay
        self.counters = Counters()
        self.nodes: dict[str, dict[str, Any]] = {}
        self.node_views: dict[str, NodeView] = {}  # each node as the agent's views parse it, since its last change
        self.schedulable: dict[str, None] = {}  # Ready, schedulable, non-control-plane nodes
        self.instances: dict[str, str] = {}  # instance id -> node name
        self.node_instance: dict[str, str] = {}  # node name -> instance id
        self.pods: dict[str, PodInfo] = {}  # ns/name -> pod, in creation order
        self.by_node: dict[str, dict[str, None]] = {}
        self.pending: dict[str, None] = {}
        self.room = Room(self.by_node, self.schedulable, max_pods_per_node)  # where a pending pod goes (``_schedule``)
        self.deployments: dict[str, Deployment] = {}
        self.daemonsets: dict[str, int | None] = {}  # ns/name -> grace
        self.budgets: dict[str, Budget] = {}
        self.budget_counts: dict[str, BudgetCounts] = {}  # budget ns/name -> its status' inputs
        self._selecting: dict[str, list[str]] = {}  # controller ("deploy:..."/"ds:...") -> budgets selecting its pods
        self._alike: dict[Alike, dict[str, PodInfo]] = {}  # the pods a budget selects all or none of (``alike``)
        self._index = BudgetIndex()  # the budgets a pod may meet, the groups a budget may select
        self.pod_log: deque[tuple[int, str, PodEvent]] = deque(maxlen=event_log)
        self.node_log: deque[tuple[int, NodeEvent]] = deque(maxlen=event_log)
        self.listeners: list[Callable[[str, PodEvent], None]] = []
        self.stops: list[Callable[[str, str, PodInfo], None]] = []  # (node, "evict"/"delete", pod): sim.watch
        self._rv = 1
        self.node_version = 0  # bumped at every change of a node or of the set of nodes (``sim.view`` caches on it)
        self._uid = 0
        self._schedule_timer: Timer | None = None
        self._pending_seconds = 0.0
        self._accounted_at = kernel.t

    # --------------------------------------------------------------------------------------------- bookkeeping

    def _bump(self, obj: dict[str, Any]) -> int:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        return self._rv

    def _account(self) -> None:
        t = self.kernel.t
        self._pending_seconds += len(self.pending) * (t - self._accounted_at)
        self._accounted_at = t

    @property
    def unschedulable_pod_seconds(self) -> float:
        """Pending (unbound) workload pods integrated over simulated time, up to now."""
        self._account()
        return self._pending_seconds

    def _pod_event(self, kind: str, info: PodInfo) -> None:
        rv = self._bump(info.obj)
        healthy = kind != "DELETED" and bool(info.node) and not info.terminating and is_ready(info.obj)
        if healthy != info.healthy:
            info.healthy = healthy
            for budget in info.budgets:
                self.budget_counts[budget].healthy += 1 if healthy else -1
        node = info.node
        info.view = None
        if not node or not (self.listeners or self.pod_log.maxlen):
            return
        event = PodEvent(type=kind, pod=self.pod_view(info), resource_version=str(rv))
        self.pod_log.append((rv, node, event))
        for listener in list(self.listeners):
            listener(node, event)

    @staticmethod
    def pod_view(info: PodInfo) -> PodView:
        """The pod as the agent's views parse it (made once per change)."""
        if info.view is None:
            info.view = PodView.from_api(info.obj)
        return info.view

    def _node_event(self, kind: str, obj: dict[str, Any]) -> None:
        rv = self._bump(obj)
        self.node_version += 1
        name = obj["metadata"]["name"]
        view = self.node_views[name] = NodeView.from_api(obj)
        if view.ready and not view.unschedulable and CONTROL_PLANE_LABEL not in view.labels:
            if name not in self.schedulable:
                self.schedulable[name] = None
                self.room.note(name)
        else:
            self.schedulable.pop(name, None)
        self.node_log.append((rv, NodeEvent(type=kind, node=view, resource_version=str(rv))))

    def _want_schedule(self) -> None:
        if self._schedule_timer is None and self.pending:
            self._schedule_timer = self.kernel.after(self.schedule_delay, "kube:schedule", self._schedule)

    # ------------------------------------------------------------------------------------------------ nodes

    def add_node(
        self,
        name: str,
        instance_id: str,
        az: str,
        *,
        instance_group: str = "nodes",
        control_plane: bool = False,
        labels: Mapping[str, str] | None = None,
        ready: bool = True,
    ) -> None:
        """A node joins (its kubelet registered): DaemonSet pods start on it, pending pods may bind to it. A node of
        the same name still registered (a reused private DNS name) goes first, as ``remove_node``. ``instance_id``
        must look like an EC2 id (``i-`` and 8 or 17 hex digits, ``core.model.parse_provider_id``) for the agent to
        find the node by it."""
        if name in self.nodes:
            self.remove_node(name)
        all_labels = {INSTANCE_GROUP_LABEL: instance_group, **(labels or {})}
        if control_plane:
            all_labels[CONTROL_PLANE_LABEL] = ""
        obj = node_object(name, instance_id, az, all_labels, ready, self.kernel.now())
        self.nodes[name] = obj
        self.instances[instance_id] = name
        self.node_instance[name] = instance_id
        self.by_node[name] = {}
        self._node_event("ADDED", obj)
        for ds in self.daemonsets:
            self._daemon_pod(ds, name)
        self._want_schedule()

    def set_node_ready(self, name: str, ready: bool) -> None:
        """The node's Ready condition (its pods' readiness follows at once: a simplification of the node
        lifecycle controller, which marks them after its grace period)."""
        obj = self.nodes[name]
        set_ready(obj, ready)
        self._node_event("MODIFIED", obj)
        for key in list(self.by_node[name]):
            info = self.pods[key]
            if not info.terminating and is_ready(info.obj) != ready and info.obj["status"]["phase"] == "Running":
                set_ready(info.obj, ready)
                self._pod_event("MODIFIED", info)
        self._want_schedule()

    def remove_node(self, name: str) -> None:
        """The node's instance terminated: the node object and every pod on it go (counted, see ``Counters``)."""
        obj = self.nodes.pop(name, None)
        if obj is None:
            return
        view = self.node_views.pop(name)
        self.schedulable.pop(name, None)
        instance = self.node_instance.pop(name, None)
        if instance is not None and self.instances.get(instance) == name:
            del self.instances[instance]
        for key in list(self.by_node.get(name, {})):
            info = self.pods[key]
            if info.workload:
                if info.terminating:
                    self.counters.cut_short += 1
                elif info.obj["status"]["phase"] == "Running":
                    self.counters.killed_by_reclaim += 1
            self._remove(info)
        self.by_node.pop(name, None)
        self._rv += 1
        self.node_version += 1
        self.node_log.append((self._rv, NodeEvent(type="DELETED", node=view, resource_version=str(self._rv))))

    def remove_instance(self, instance_id: str) -> None:
        """``remove_node`` for the node of ``instance_id`` (nothing when it has none)."""
        name = self.instances.get(instance_id)
        if name is not None:
            self.remove_node(name)

    def _new_pod(
        self,
        namespace: str,
        name: str,
        labels: dict[str, str],
        owner: tuple[str, str] | None,
        grace: int | None,
        owner_key: str,
    ) -> PodInfo:
        self._uid += 1
        uid = f"pod-{self._uid:08d}"
        info = PodInfo(pod_object(namespace, name, uid, labels, owner, grace, self.kernel.now()), owner_key)
        self._bump(info.obj)
        self.pods[info.key] = info
        self._index.group_of(self._alike, alike(info))[info.key] = info
        if info.workload:
            self.counters.created += 1
        selecting = self._selecting.get(owner_key) if owner_key else None
        if selecting is None:  # the pods of one controller share their labels: judged once per controller
            meta = info.obj["metadata"]  # what ``_selects`` reads
            candidates = self._index.budgets_for(meta["namespace"], meta.get("labels") or {})
            selecting = [b for b in candidates if self._selects(b, info)]
            if owner_key:
                self._selecting[owner_key] = selecting
        for budget in selecting:
            self._match(info, budget)
        return info

    def _selects(self, budget_key: str, info: PodInfo) -> bool:
        budget = self.budgets[budget_key]
        meta = info.obj["metadata"]
        return bool(meta["namespace"] == budget.namespace and selects(budget.selector, meta.get("labels") or {}))

    def _match(self, info: PodInfo, budget_key: str) -> None:
        """Count ``info`` in the budget ``budget_key`` (which selects it)."""
        counts = self.budget_counts[budget_key]
        if info.owner.startswith("deploy:"):
            counts.deploys[info.owner] = counts.deploys.get(info.owner, 0) + 1
        else:
            counts.others += 1
        counts.healthy += 1 if info.healthy else 0
        info.budgets.append(budget_key)

    def _daemon_pod(self, ds: str, node: str) -> None:
        """The DaemonSet controller's pod on a joining node (``sim.kube_workloads``)."""

    def _reconcile(self, key: str) -> None:
        """The ReplicaSet controller after a change of the Deployment ``key``'s pods (``sim.kube_workloads``)."""

    # ------------------------------------------------------------------------------------------- scheduler

    def _schedule(self) -> None:
        """Bind pending pods, oldest first, each to the schedulable node with the fewest pods (then by name)."""
        self._schedule_timer = None
        for key in list(self.pending):
            node = self.room.take()  # ``Room``: not a look at every node (a bind notes its node's new count)
            if node is None:
                break
            self._bind(self.pods[key], node, phase="Running", ready=False)

    def _bind(self, info: PodInfo, node: str, *, phase: str, ready: bool) -> None:
        if info.key in self.pending:
            self._account()
            del self.pending[info.key]
        info.obj["spec"]["nodeName"] = node
        info.obj["status"]["phase"] = phase
        set_ready(info.obj, ready)
        self.by_node[node][info.key] = None
        self.room.note(node)
        self._pod_event("ADDED", info)
        if not ready and phase == "Running":
            uid = info.obj["metadata"]["uid"]
            self.kernel.after(self.pod_ready_seconds, "kube:pod-ready", lambda: self._become_ready(info.key, uid))

    def _become_ready(self, key: str, uid: str) -> None:
        info = self.pods.get(key)
        if (
            info is None
            or info.obj["metadata"]["uid"] != uid
            or info.terminating
            or not is_ready(self.nodes.get(info.node, {"status": {}}))
        ):
            return
        set_ready(info.obj, True)
        self._pod_event("MODIFIED", info)

    # ------------------------------------------------------------------------------------------- deletion

    def _terminate(self, info: PodInfo, grace: int | None) -> None:
        """Graceful deletion: ``deletionTimestamp`` set, gone after the grace (at once when unbound or finished).
        A shorter grace on a pod already terminating brings its end forward; a longer one changes nothing."""
        own = info.obj["spec"].get("terminationGracePeriodSeconds")
        seconds = max(0, grace if grace is not None else (DEFAULT_GRACE if own is None else int(own)))
        if not info.node or info.obj["status"]["phase"] in ("Succeeded", "Failed") or seconds == 0:
            self._remove(info)
            return
        end = self.kernel.t + seconds
        if info.gone_at is not None and info.gone_at <= end:
            return
        if info.timer is not None:
            info.timer.cancel()
        info.gone_at = end
        meta = info.obj["metadata"]
        meta["deletionTimestamp"] = timestamp(self.kernel.now() + timedelta(seconds=seconds))
        meta["deletionGracePeriodSeconds"] = seconds
        set_ready(info.obj, False)
        uid = meta["uid"]
        info.timer = self.kernel.after(seconds, "kube:pod-gone", lambda: self._gone(info.key, uid))
        self._pod_event("MODIFIED", info)
        if info.owner.startswith("deploy:"):
            dep_key = info.owner[len("deploy:") :]
            dep = self.deployments.get(dep_key)
            if dep is not None:
                dep.active.pop(info.key, None)
            self._reconcile(dep_key)

    def _gone(self, key: str, uid: str) -> None:
        info = self.pods.get(key)
        if info is not None and info.obj["metadata"]["uid"] == uid:
            self._remove(info)

    def _remove(self, info: PodInfo) -> None:
        key = info.key
        if self.pods.get(key) is not info:
            return
        if info.timer is not None:
            info.timer.cancel()
        del self.pods[key]
        group = self._alike.get(alike(info), {})
        if group.get(key) is info:
            del group[key]
        if key in self.pending:
            self._account()
            del self.pending[key]
        if info.node:
            self.by_node.get(info.node, {}).pop(key, None)
            self.room.note(info.node)
        self._pod_event("DELETED", info)
        for budget in info.budgets:
            counts = self.budget_counts[budget]
            if info.owner.startswith("deploy:"):
                counts.deploys[info.owner] -= 1
                if not counts.deploys[info.owner]:
                    del counts.deploys[info.owner]
            else:
                counts.others -= 1
        self._want_schedule()  # room freed
        if info.owner.startswith("deploy:"):
            dep_key = info.owner[len("deploy:") :]
            dep = self.deployments.get(dep_key)
            if dep is not None:
                dep.pods.pop(key, None)
                dep.active.pop(key, None)
            self._reconcile(dep_key)
