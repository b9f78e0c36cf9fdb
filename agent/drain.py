"""The drain engine: cordon, drain and uncordon one node, as ``kubectl drain`` / ``kubectl uncordon`` would.

The steps read like a runbook (``DrainEngine``): ``find_node`` (by ``spec.providerID``, never by name) →
``cordon_node`` (marking the cordon as ours) → ``list_pods_on_node`` → ``plan_drain`` (pure: what to do with each
pod, ``pod_disposition``) → ``evict_pods`` (parallel, through the Eviction API; PodDisruptionBudgets answer 429 and
are retried with backoff) → ``wait_until_gone`` (a watch on the node's pods, not polling) → ``DrainResult``.

Decisions are pure functions with their own tests: ``pod_disposition``, ``plan_drain``, ``decide_cordon``,
``decide_uncordon``, ``backoff_delay``, and ``DrainProgress`` (a state machine fed with eviction outcomes and watch
events). Effects go through ``agent.kube.KubeAdapter``, the only module that talks to the Kubernetes API.

Every wait is bounded by the command's deadline (``Deadline``, on an injectable ``Clock``). At the deadline the
drain ends ``timed_out`` listing the pods still there and why; the node stays cordoned (unless
``options.uncordon_on_failure`` and the cordon is ours).
"""

from __future__ import annotations

import contextvars
import logging
import math
import queue
import random
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pydantic import BaseModel, Field

from agent.kube.client import KubeAdapter
from agent.kube.eviction import EvictionResponse, EvictionStatus
from agent.kube.views import CORDON_ANNOTATION, MIRROR_POD_ANNOTATION, NodeView, PodEvent, PodView
from core.exceptions import KubernetesApiError, KubernetesRejectedError, NodeManagerError, NodeNotFoundError
from core.model import Command, CommandKind, CommandStatus, DrainOptions

if TYPE_CHECKING:
    from agent.events import NodeEventRecorder

log = logging.getLogger(__name__)

CORDON_CONFLICT_RETRIES = 8
EVICTION_ERROR_RETRIES = 5  # tries of an eviction failing with a retryable error other than a PDB's 429
MAX_WATCH_SECONDS = 300


# ------------------------------------------------------------------------------------------------ time


class Clock(Protocol):
    """Time as the engine sees it (injectable for tests)."""

    def now(self) -> datetime:
        """Wall-clock time, aware, UTC."""
        ...

    def monotonic(self) -> float:
        """Seconds on a monotonic clock."""
        ...

    def sleep(self, seconds: float, stop: threading.Event) -> bool:
        """Wait ``seconds`` or until ``stop`` is set; True when stopped."""
        ...


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return float(time.monotonic())

    def sleep(self, seconds: float, stop: threading.Event) -> bool:
        return stop.wait(max(0.0, seconds))


class Deadline:
    """A point in time on ``clock``'s monotonic scale.

    Args:
        clock: the clock.
        seconds: seconds from now (negative = already passed).
    """

    def __init__(self, clock: Clock, seconds: float) -> None:
        self.clock = clock
        self.end = clock.monotonic() + seconds

    @classmethod
    def at(cls, when: datetime, clock: Clock) -> Deadline:
        """The deadline at wall-clock ``when`` (aware)."""
        return cls(clock, (when - clock.now()).total_seconds())

    def remaining(self) -> float:
        """Seconds left, never negative."""
        return max(0.0, self.end - self.clock.monotonic())

    @property
    def expired(self) -> bool:
        return self.clock.monotonic() >= self.end


class BackoffSettings(Protocol):
    """What the engine needs of the agent's settings (``core.settings.AgentSettings`` has it)."""

    @property
    def eviction_backoff_seconds(self) -> float: ...

    @property
    def eviction_backoff_max_seconds(self) -> float: ...


def backoff_delay(attempt: int, base: float, cap: float, rand: Callable[[], float] = random.random) -> float:
    """Seconds to wait before try ``attempt + 1`` after ``attempt`` (>= 1) failed tries (pure but for ``rand``).

    Exponential (``base * 2**(attempt-1)``, capped at ``cap``) with "equal jitter": uniformly within
    [delay/2, delay], so parallel evictions blocked by one budget do not retry in lockstep.
    """
    delay = min(cap, base * 2.0 ** max(0, attempt - 1))
    return delay / 2 + (delay / 2) * rand()


# --------------------------------------------------------------------------------------- pod decisions


class PodAction(str, Enum):
    EVICT = "evict"  # through the Eviction API
    DELETE = "delete"  # a finished pod: plain DELETE (no budget counts it)
    SKIP = "skip"  # left on the node (DaemonSet, mirror pod)
    WAIT = "wait"  # already terminating: only wait until it is gone
    REFUSE = "refuse"  # kubectl drain would error on it; the drain fails before evicting anything


@dataclass(frozen=True)
class Disposition:
    """What to do with one pod, and why (the reason is reported per pod)."""

    action: PodAction
    reason: str = ""


def pod_disposition(
    pod: PodView, options: DrainOptions, missing_daemonsets: frozenset[tuple[str, str]] = frozenset()
) -> Disposition:
    """Decide what the drain does with ``pod`` (pure), following kubectl's drain filters
    (k8s.io/kubectl/pkg/drain/filters.go) in order:

    1. terminating (``metadata.deletionTimestamp`` set) → WAIT "terminating";
    2. mirror pod (annotation ``kubernetes.io/config.mirror``; a static pod's API copy) → SKIP "mirror";
    3. controlled by a DaemonSet → SKIP "daemonset" with ``ignore_daemonsets``, else REFUSE; when that
       DaemonSet no longer exists (``(namespace, name)`` in ``missing_daemonsets``) the pod is an orphan: EVICT
       with ``force``, else REFUSE;
    4. finished (phase Succeeded or Failed) → DELETE "finished";
    5. emptyDir volumes → EVICT "emptydir: local data lost" with ``delete_emptydir_data``, else REFUSE;
       no controller owner reference → EVICT "unmanaged: will not be recreated" with ``force``, else REFUSE
       (both apply, and are both reported, for a bare pod with an emptyDir);
    6. otherwise → EVICT (reason names the controller).
    """
    if pod.deletion_timestamp is not None:
        return Disposition(PodAction.WAIT, "terminating")
    if MIRROR_POD_ANNOTATION in pod.annotations:
        return Disposition(PodAction.SKIP, "mirror")
    controller = pod.controller
    if controller is not None and controller.kind == "DaemonSet":
        if (pod.namespace, controller.name) in missing_daemonsets:
            if options.force:
                return Disposition(PodAction.EVICT, "daemonset gone: orphan pod")
            return Disposition(PodAction.REFUSE, "daemonset gone: orphan pod (needs force)")
        if options.ignore_daemonsets:
            return Disposition(PodAction.SKIP, "daemonset")
        return Disposition(PodAction.REFUSE, "daemonset (needs ignore_daemonsets)")
    if pod.phase in ("Succeeded", "Failed"):
        return Disposition(PodAction.DELETE, "finished")
    reasons: list[str] = []
    refused: list[str] = []
    if pod.emptydir_volumes:
        if options.delete_emptydir_data:
            reasons.append("emptydir: local data lost")
        else:
            refused.append("emptydir: local data (needs delete_emptydir_data)")
    if controller is None:
        if options.force:
            reasons.append("unmanaged: will not be recreated")
        else:
            refused.append("unmanaged: not managed by a controller (needs force)")
    if refused:
        return Disposition(PodAction.REFUSE, "; ".join(refused))
    if not reasons and controller is not None:
        reasons.append(f"managed by {controller.kind} {controller.name}")
    return Disposition(PodAction.EVICT, "; ".join(reasons))


@dataclass(frozen=True)
class DrainPlan:
    """The drain's plan for a node's pods (``plan_drain``).

    Attributes:
        decisions: every pod with its disposition, in listing order.
    """

    decisions: tuple[tuple[PodView, Disposition], ...]

    def with_action(self, *actions: PodAction) -> list[tuple[PodView, Disposition]]:
        return [(pod, d) for pod, d in self.decisions if d.action in actions]

    @property
    def refused(self) -> list[tuple[PodView, Disposition]]:
        return self.with_action(PodAction.REFUSE)


def plan_drain(
    pods: Iterable[PodView], options: DrainOptions, missing_daemonsets: frozenset[tuple[str, str]] = frozenset()
) -> DrainPlan:
    """Apply ``pod_disposition`` to every pod (pure)."""
    return DrainPlan(tuple((pod, pod_disposition(pod, options, missing_daemonsets)) for pod in pods))


def daemonset_owners(pods: Iterable[PodView]) -> set[tuple[str, str]]:
    """(namespace, name) of every DaemonSet controlling one of ``pods`` (pure)."""
    return {
        (pod.namespace, pod.controller.name)
        for pod in pods
        if pod.controller is not None and pod.controller.kind == "DaemonSet" and pod.deletion_timestamp is None
    }


# ---------------------------------------------------------------------------------------- node decisions


@dataclass(frozen=True)
class CordonDecision:
    """What cordoning a node takes (``decide_cordon``).

    Attributes:
        patch: the merge patch to send (None: nothing to change).
        ours: after the patch the cordon is this system's (our annotation is on the node).
        by_other: the node was already cordoned by someone else (no annotation of ours): left so.
    """

    patch: dict[str, Any] | None
    ours: bool
    by_other: bool


def decide_cordon(node: NodeView, command_id: str) -> CordonDecision:
    """Decide how to cordon ``node`` for command ``command_id`` (pure).

    - schedulable → set ``spec.unschedulable`` and our annotation in one patch conditioned on the node's
      resourceVersion;
    - unschedulable with our annotation (any command id: a redelivered command, or an earlier command of this
      system) → already ours, nothing to change;
    - unschedulable without it → someone else's cordon: nothing to change, and never ours to undo.
    """
    if node.unschedulable:
        if node.cordoned_by is not None:
            return CordonDecision(patch=None, ours=True, by_other=False)
        return CordonDecision(patch=None, ours=False, by_other=True)
    patch = {
        "metadata": {"resourceVersion": node.resource_version, "annotations": {CORDON_ANNOTATION: command_id}},
        "spec": {"unschedulable": True},
    }
    return CordonDecision(patch=patch, ours=True, by_other=False)


@dataclass(frozen=True)
class UncordonDecision:
    """What uncordoning a node takes (``decide_uncordon``).

    Attributes:
        patch: the merge patch to send (None: nothing to change).
        by_other: the node is cordoned by someone else: left cordoned.
        message: what happens, for the result.
    """

    patch: dict[str, Any] | None
    by_other: bool
    message: str


def decide_uncordon(node: NodeView) -> UncordonDecision:
    """Decide how to uncordon ``node`` (pure): only a cordon carrying our annotation is undone (the annotation is
    removed with it); a node someone else cordoned stays cordoned (DESIGN.md, safety invariant 6)."""
    if node.cordoned_by is not None:
        patch = {
            "metadata": {"resourceVersion": node.resource_version, "annotations": {CORDON_ANNOTATION: None}},
            "spec": {"unschedulable": None} if node.unschedulable else {},
        }
        return UncordonDecision(patch=patch, by_other=False, message=f"uncordoned node {node.name}")
    if node.unschedulable:
        return UncordonDecision(
            patch=None, by_other=True, message=f"node {node.name} was cordoned by someone else: left cordoned"
        )
    return UncordonDecision(patch=None, by_other=False, message=f"node {node.name} is not cordoned")


_D = TypeVar("_D", CordonDecision, UncordonDecision)


# ------------------------------------------------------------------------------------------------ result


class PodOutcome(BaseModel):
    """What happened to one pod of the node.

    Attributes:
        action: the disposition's action (evict, delete, skip, wait, refuse).
        reason: the disposition's reason ("daemonset", "emptydir: local data lost", ...).
        attempts: eviction (or delete) requests sent.
        evicted_at: when the apiserver accepted the eviction (UTC).
        gone: the pod was seen deleted (or replaced by another pod of the same name) before the end.
        error: the last error, when the eviction failed or was still being refused.
    """

    namespace: str
    name: str
    uid: str = ""
    action: PodAction
    reason: str = ""
    attempts: int = 0
    evicted_at: datetime | None = None
    gone: bool = False
    error: str | None = None


class RemainingPod(BaseModel):
    """A pod still on the node at the end, and why ("blocked by PodDisruptionBudget web", "still terminating")."""

    namespace: str
    name: str
    why: str


class Durations(BaseModel):
    """Seconds spent: finding the node, cordoning, evicting (until every eviction was answered for good), waiting
    (after the last eviction until the last pod was gone), and in all."""

    resolve: float = 0.0
    cordon: float = 0.0
    evict: float = 0.0
    wait: float = 0.0
    total: float = 0.0


class DrainResult(BaseModel):
    """The result of one command (JSON-able: ``model_dump(mode="json")``).

    Attributes:
        status: succeeded | timed_out | failed | skipped (``core.model.CommandStatus``).
        cordoned_by_us: our cordon annotation is on the node (we cordoned it, now or earlier).
        cordoned_by_other: the node was cordoned by someone else (never uncordoned by us).
        uncordoned: this command removed our cordon.
        pods: every pod found on the node, with what was done.
        remaining: pods still on the node at the deadline (or at a failure), with why.
        errors: errors met (per pod, uncordon after failure ...).
        event_posted: a Kubernetes Event for this result was posted on the Node.
    """

    command_id: str
    kind: CommandKind
    instance_id: str
    node_name: str
    status: CommandStatus
    message: str = ""
    cordoned_by_us: bool = False
    cordoned_by_other: bool = False
    uncordoned: bool = False
    pods: list[PodOutcome] = Field(default_factory=list)
    remaining: list[RemainingPod] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    durations: Durations = Field(default_factory=Durations)
    started_at: datetime
    finished_at: datetime
    event_posted: bool = False


# ------------------------------------------------------------------------------------- progress tracking


@dataclass(frozen=True)
class EvictionUpdate:
    """A message from an eviction worker: the latest answer for a pod; ``final`` once the worker stopped."""

    key: str
    attempts: int
    response: EvictionResponse | None
    final: bool
    at: datetime | None = None
    error: str | None = None  # set when the worker gave up


@dataclass
class _PodState:
    pod: PodView
    disposition: Disposition
    attempts: int = 0
    evicted_at: datetime | None = None
    gone: bool = False
    worker_done: bool = False
    failed: str | None = None
    last: EvictionResponse | None = None


class DrainProgress:
    """The drain's bookkeeping (pure: fed with ``EvictionUpdate``s, watch ``PodEvent``s and re-list snapshots).

    A pod is *gone* when a DELETED event carries its uid, when a pod of the same name with another uid shows up
    (it was replaced), or when a re-list no longer has its uid. The drain is *settled* when every tracked pod
    (evict, delete, wait) is gone or its worker gave up.
    """

    def __init__(self, plan: DrainPlan) -> None:
        self.states: dict[str, _PodState] = {}
        self.others: list[tuple[PodView, Disposition]] = []
        for pod, disposition in plan.decisions:
            if disposition.action in (PodAction.EVICT, PodAction.DELETE, PodAction.WAIT):
                state = _PodState(pod, disposition, worker_done=disposition.action == PodAction.WAIT)
                self.states[pod.key] = state
            else:
                self.others.append((pod, disposition))
        self.last_eviction_done: float | None = None

    def apply_update(self, update: EvictionUpdate) -> None:
        state = self.states.get(update.key)
        if state is None:
            return
        state.attempts = update.attempts
        if update.response is not None:
            state.last = update.response
            if update.response.status == EvictionStatus.EVICTED and state.evicted_at is None:
                state.evicted_at = update.at
            if update.response.status == EvictionStatus.GONE:
                state.gone = True
        if update.final:
            state.worker_done = True
            state.failed = update.error

    def apply_event(self, event: PodEvent) -> None:
        pod = event.pod
        if pod is None:
            return
        state = self.states.get(pod.key)
        if state is None:
            return
        if pod.uid != state.pod.uid or event.type == "DELETED":
            state.gone = True

    def apply_snapshot(self, pods: Iterable[PodView]) -> None:
        present = {(p.key, p.uid) for p in pods}
        for key, state in self.states.items():
            if (key, state.pod.uid) not in present:
                state.gone = True

    @property
    def settled(self) -> bool:
        return all(s.gone or (s.worker_done and s.failed is not None) for s in self.states.values())

    @property
    def evictions_done(self) -> bool:
        return all(s.worker_done or s.gone for s in self.states.values())

    def failures(self) -> list[_PodState]:
        return [s for s in self.states.values() if s.failed is not None and not s.gone]

    def remaining(self) -> list[RemainingPod]:
        out = []
        for state in self.states.values():
            if state.gone:
                continue
            out.append(RemainingPod(namespace=state.pod.namespace, name=state.pod.name, why=self._why(state)))
        return out

    @staticmethod
    def _why(state: _PodState) -> str:
        if state.failed is not None:
            return f"eviction failed: {state.failed}"
        if state.disposition.action == PodAction.WAIT or state.evicted_at is not None:
            return "still terminating"
        if state.disposition.action == PodAction.DELETE and state.attempts > 0 and state.last is None:
            return "still terminating"
        last = state.last
        if last is None:
            return "not evicted yet"
        if last.status == EvictionStatus.BLOCKED:
            if last.pdb_name:
                return f"blocked by PodDisruptionBudget {last.pdb_name}"
            return f"eviction refused (429): {last.message}"
        if last.status == EvictionStatus.MULTIPLE_PDBS:
            return f"selected by more than one PodDisruptionBudget: {last.message}"
        return f"eviction failing (HTTP {last.http_status}): {last.message}"

    def outcomes(self) -> list[PodOutcome]:
        out = []
        for pod, disposition in self.others:
            out.append(
                PodOutcome(
                    namespace=pod.namespace,
                    name=pod.name,
                    uid=pod.uid,
                    action=disposition.action,
                    reason=disposition.reason,
                )
            )
        for state in self.states.values():
            error = state.failed
            last = state.last
            if error is None and not state.gone and last is not None and last.status != EvictionStatus.EVICTED:
                error = self._why(state)
            out.append(
                PodOutcome(
                    namespace=state.pod.namespace,
                    name=state.pod.name,
                    uid=state.pod.uid,
                    action=state.disposition.action,
                    reason=state.disposition.reason,
                    attempts=state.attempts,
                    evicted_at=state.evicted_at,
                    gone=state.gone,
                    error=error,
                )
            )
        return out


# ------------------------------------------------------------------------------------------------ engine


class DrainEngine:
    """Runs cordon, drain and uncordon commands against one cluster.

    Args:
        kube: the Kubernetes adapter (built by the entry point).
        settings: eviction backoff (``eviction_backoff_seconds`` .. ``eviction_backoff_max_seconds``);
            ``core.settings.AgentSettings`` fits.
        clock: time source (default ``SystemClock()``).
        events: posts the Kubernetes Event of each result on its Node (None: post none).
        max_workers: pods evicted in parallel per drain (each retries on its own, with its own backoff).
        max_requests_in_flight: eviction/delete requests sent at once, over all drains of this engine. Each
            concurrent request needs its own connection, and a new TLS connection costs the apiserver more CPU
            than a request on a warm one (here, 30 evictions: ~0.2 s with 4 connections, ~1 s with 32 new
            ones); the ApiClient's pool (``agent.kube.make_api_client``) keeps these connections warm.
        rand: jitter source in [0, 1).

    Thread-safe: several commands may run at once on one engine (each drain has its own pool and watch).
    """

    def __init__(
        self,
        kube: KubeAdapter,
        settings: BackoffSettings,
        clock: Clock | None = None,
        events: NodeEventRecorder | None = None,
        max_workers: int = 32,
        max_requests_in_flight: int = 4,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.kube = kube
        self.backoff_base = float(settings.eviction_backoff_seconds)
        self.backoff_cap = float(settings.eviction_backoff_max_seconds)
        self.clock: Clock = clock or SystemClock()
        self.events = events
        self.max_workers = max(1, max_workers)
        self._request_slots = threading.BoundedSemaphore(max(1, max_requests_in_flight))
        self.rand = rand

    # ----------------------------------------------------------------------------------------- entry

    def run(self, command: Command) -> DrainResult:
        """Execute ``command`` (kind drain, cordon or uncordon) and post its Event on the Node.

        Returns:
            the ``DrainResult`` (status succeeded, timed_out or failed).

        Raises:
            NodeNotFoundError: no node has the providerID of ``command.instance_id`` (finish it ``skipped``).
            KubernetesApiError: the API failed (5xx, connection) before the work could be reported (retry).
            KubernetesRejectedError: the API refused a request for good (e.g. 403: the ClusterRole lacks a verb).
        """
        started_at = self.clock.now()
        t0 = self.clock.monotonic()
        node = self.find_node(command.instance_id, command.node_name)
        durations = Durations(resolve=self.clock.monotonic() - t0)
        log.info(
            "command start command_id=%s kind=%s node=%s instance=%s",
            command.command_id,
            command.kind.value,
            node.name,
            command.instance_id,
        )
        if command.kind == CommandKind.UNCORDON:
            result = self._uncordon(command, node, started_at, durations)
        else:
            result = self._cordon_and_maybe_drain(command, node, started_at, durations, t0)
        if self.events is not None:
            result.event_posted = self.events.record(node, result)
        log.info(
            "command end command_id=%s kind=%s node=%s status=%s total=%.3fs message=%s",
            command.command_id,
            command.kind.value,
            node.name,
            result.status.value,
            result.durations.total,
            result.message,
        )
        return result

    # --------------------------------------------------------------------------------------- steps

    def find_node(self, instance_id: str, node_name: str | None = None) -> NodeView:
        """The node whose ``spec.providerID`` names ``instance_id``; the ``node_name`` hint is tried first (and
        used only if its providerID matches).

        Raises:
            NodeNotFoundError: no such node. KubernetesApiError / KubernetesRejectedError: see ``KubeAdapter``.
        """
        if node_name:
            node = self.kube.get_node(node_name)
            if node is not None and node.instance_id == instance_id:
                return node
        for node in self.kube.list_nodes():
            if node.instance_id == instance_id:
                return node
        raise NodeNotFoundError(instance_id)

    def cordon_node(self, node: NodeView, command_id: str) -> tuple[NodeView, CordonDecision]:
        """Cordon ``node`` as ours unless someone else already did (``decide_cordon``); a conflicting write
        (409: the node changed since it was read) is re-read and re-decided.

        Returns:
            the node as it is now, and the decision applied.

        Raises:
            KubernetesApiError: still conflicting after ``CORDON_CONFLICT_RETRIES`` tries, or see ``KubeAdapter``.
            NodeNotFoundError: the node vanished meanwhile.
        """
        return self._patch_until_applied(node, lambda n: decide_cordon(n, command_id))

    def uncordon_node(self, node: NodeView) -> tuple[NodeView, UncordonDecision]:
        """Undo our cordon of ``node`` (``decide_uncordon``); someone else's is left alone. Conflicts as in
        ``cordon_node``."""
        return self._patch_until_applied(node, decide_uncordon)

    def _patch_until_applied(self, node: NodeView, decide: Callable[[NodeView], _D]) -> tuple[NodeView, _D]:
        current: NodeView | None = node
        for _ in range(CORDON_CONFLICT_RETRIES):
            if current is None:
                raise NodeNotFoundError(node.instance_id or node.name)
            decision = decide(current)
            if decision.patch is None:
                return current, decision
            try:
                patched = self.kube.patch_node(current.name, decision.patch)
            except KubernetesRejectedError as err:
                if err.status == 404:
                    raise NodeNotFoundError(node.instance_id or node.name) from err
                raise
            if patched is not None:
                return patched, decision
            current = self.kube.get_node(node.name)
        raise KubernetesApiError(f"node {node.name} kept changing: {CORDON_CONFLICT_RETRIES} conflicting patches")

    # --------------------------------------------------------------------------------------- kinds

    def _uncordon(self, command: Command, node: NodeView, started_at: datetime, durations: Durations) -> DrainResult:
        t = self.clock.monotonic()
        _, decision = self.uncordon_node(node)
        durations.cordon = self.clock.monotonic() - t
        durations.total = durations.resolve + durations.cordon
        return DrainResult(
            command_id=command.command_id,
            kind=command.kind,
            instance_id=command.instance_id,
            node_name=node.name,
            status=CommandStatus.SUCCEEDED,
            message=decision.message,
            cordoned_by_us=False,
            cordoned_by_other=decision.by_other,
            uncordoned=decision.patch is not None,
            durations=durations,
            started_at=started_at,
            finished_at=self.clock.now(),
        )

    def _cordon_and_maybe_drain(
        self, command: Command, node: NodeView, started_at: datetime, durations: Durations, t0: float
    ) -> DrainResult:
        t = self.clock.monotonic()
        node, decision = self.cordon_node(node, command.command_id)
        durations.cordon = self.clock.monotonic() - t
        result = DrainResult(
            command_id=command.command_id,
            kind=command.kind,
            instance_id=command.instance_id,
            node_name=node.name,
            status=CommandStatus.SUCCEEDED,
            cordoned_by_us=decision.ours,
            cordoned_by_other=decision.by_other,
            started_at=started_at,
            finished_at=started_at,
            durations=durations,
        )
        if command.kind == CommandKind.CORDON:
            result.message = (
                f"node {node.name} was already cordoned by someone else"
                if decision.by_other
                else f"cordoned node {node.name}"
            )
        else:
            self._drain(command, node, result)
        durations.total = self.clock.monotonic() - t0
        result.finished_at = self.clock.now()
        return result

    def _drain(self, command: Command, node: NodeView, result: DrainResult) -> None:
        options = command.options
        deadline = Deadline.at(command.deadline, self.clock)
        pods, resource_version = self.kube.list_pods_on_node(node.name)
        missing = frozenset(ds for ds in daemonset_owners(pods) if not self.kube.daemonset_exists(*ds))
        plan = plan_drain(pods, options, missing)
        progress = DrainProgress(plan)
        if plan.refused:
            refused = ", ".join(f"{pod.key} ({d.reason})" for pod, d in plan.refused)
            result.status = CommandStatus.FAILED
            result.message = f"drain of {node.name} refused, nothing evicted: {refused}"
            result.pods = progress.outcomes()
            result.remaining = [
                RemainingPod(namespace=pod.namespace, name=pod.name, why=f"refused: {d.reason}")
                for pod, d in plan.refused
            ]
            self._uncordon_after_failure(options, node, result)
            return
        if progress.states:
            self._evict_and_wait(node, options, deadline, progress, resource_version, result.durations)
        result.pods = progress.outcomes()
        result.remaining = progress.remaining()
        failures = progress.failures()
        counts = self._counts(progress)
        if not result.remaining:
            result.status = CommandStatus.SUCCEEDED
            result.message = f"drained node {node.name}: {counts}"
        elif failures:
            result.status = CommandStatus.FAILED
            result.errors = [f"{s.pod.key}: {s.failed}" for s in failures]
            result.message = f"drain of {node.name} failed: {len(failures)} pod(s) could not be evicted; {counts}"
        else:
            result.status = CommandStatus.TIMED_OUT
            result.message = f"drain of {node.name} timed out with {len(result.remaining)} pod(s) left: " + ", ".join(
                f"{r.namespace}/{r.name} ({r.why})" for r in result.remaining[:10]
            )
        if result.status != CommandStatus.SUCCEEDED:
            self._uncordon_after_failure(options, node, result)

    @staticmethod
    def _counts(progress: DrainProgress) -> str:
        gone = dict.fromkeys((PodAction.EVICT, PodAction.DELETE, PodAction.WAIT), 0)
        for state in progress.states.values():
            if state.gone:
                gone[state.disposition.action] += 1
        skipped = sum(1 for _, d in progress.others if d.action == PodAction.SKIP)
        return (
            f"{gone[PodAction.EVICT]} evicted, {gone[PodAction.DELETE]} finished deleted, "
            f"{gone[PodAction.WAIT]} already terminating, {skipped} skipped"
        )

    def _uncordon_after_failure(self, options: DrainOptions, node: NodeView, result: DrainResult) -> None:
        if not (options.uncordon_on_failure and result.cordoned_by_us):
            return
        try:
            current = self.kube.get_node(node.name) or node
            _, decision = self.uncordon_node(current)
            result.uncordoned = decision.patch is not None
        except NodeManagerError as err:
            result.errors.append(f"uncordon after failure: {err}")

    # ------------------------------------------------------------------------------ evict and wait

    def _evict_and_wait(
        self,
        node: NodeView,
        options: DrainOptions,
        deadline: Deadline,
        progress: DrainProgress,
        resource_version: str,
        durations: Durations,
    ) -> None:
        """Evict (or delete) the tracked pods in parallel and wait, on a watch, until each is gone, its
        eviction gave up, or the deadline passed."""
        inbox: queue.Queue[tuple[str, Any]] = queue.Queue()
        stop = threading.Event()
        watcher = _PodWatcher(self.kube, node.name, resource_version, deadline, inbox, stop, self.clock)
        watcher.start()
        todo = [s for s in progress.states.values() if s.disposition.action in (PodAction.EVICT, PodAction.DELETE)]
        pool = ThreadPoolExecutor(max_workers=min(self.max_workers, max(1, len(todo))), thread_name_prefix="evict")
        t_evict = self.clock.monotonic()
        try:
            for state in todo:
                # each worker runs in a copy of this thread's context: its log lines carry the command's fields
                pool.submit(
                    contextvars.copy_context().run,
                    self._evict_until_done,
                    state.pod,
                    state.disposition.action,
                    options,
                    deadline,
                    stop,
                    inbox,
                )
            evictions_done_at: float | None = None
            while not progress.settled:
                wait = deadline.remaining()
                if wait <= 0:
                    break
                try:
                    kind, payload = inbox.get(timeout=wait)
                except queue.Empty:
                    break
                if kind == "update":
                    progress.apply_update(payload)
                elif kind == "event":
                    progress.apply_event(payload)
                elif kind == "snapshot":
                    progress.apply_snapshot(payload)
                elif kind == "watch_error":
                    log.warning("pod watch on %s: %s", node.name, payload)
                if evictions_done_at is None and progress.evictions_done:
                    evictions_done_at = self.clock.monotonic()
            end = self.clock.monotonic()
            if evictions_done_at is None:
                evictions_done_at = end
            durations.evict = evictions_done_at - t_evict
            durations.wait = max(0.0, end - evictions_done_at)
        finally:
            stop.set()
            watcher.stop()
            pool.shutdown(wait=False, cancel_futures=True)

    def _evict_until_done(
        self,
        pod: PodView,
        action: PodAction,
        options: DrainOptions,
        deadline: Deadline,
        stop: threading.Event,
        inbox: queue.Queue[tuple[str, Any]],
    ) -> None:
        """One pod's eviction (or deletion) with retries; reports every answer on ``inbox``. Never raises.

        429 (a PodDisruptionBudget) and 500 "more than one PodDisruptionBudget" are retried with backoff until
        the deadline; other retryable errors (5xx, connection) ``EVICTION_ERROR_RETRIES`` times; anything else
        gives up at once.
        """
        attempts = 0
        errors = 0
        try:
            while not stop.is_set():
                if deadline.expired:
                    inbox.put(("update", EvictionUpdate(pod.key, attempts, None, final=True)))
                    return
                attempts += 1
                with self._request_slots:
                    if action == PodAction.DELETE:
                        response = self._delete(pod, options)
                    else:
                        response = self.kube.evict_pod(
                            pod.namespace, pod.name, pod.uid or None, options.grace_period_seconds
                        )
                now = self.clock.now()
                if response.status in (EvictionStatus.EVICTED, EvictionStatus.GONE):
                    inbox.put(("update", EvictionUpdate(pod.key, attempts, response, final=True, at=now)))
                    return
                if response.status in (EvictionStatus.BLOCKED, EvictionStatus.MULTIPLE_PDBS):
                    delay = backoff_delay(attempts, self.backoff_base, self.backoff_cap, self.rand)
                else:
                    errors += 1
                    if not response.retryable or errors >= EVICTION_ERROR_RETRIES:
                        error = f"HTTP {response.http_status}: {response.message}"
                        update = EvictionUpdate(pod.key, attempts, response, final=True, at=now, error=error)
                        inbox.put(("update", update))
                        return
                    delay = backoff_delay(errors, self.backoff_base, self.backoff_cap, self.rand)
                inbox.put(("update", EvictionUpdate(pod.key, attempts, response, final=False, at=now)))
                if self.clock.sleep(min(delay, deadline.remaining()), stop):
                    return
        except Exception as err:
            log.exception("eviction worker for %s crashed", pod.key)
            inbox.put(("update", EvictionUpdate(pod.key, attempts, None, final=True, error=f"internal error: {err}")))

    def _delete(self, pod: PodView, options: DrainOptions) -> EvictionResponse:
        try:
            deleted = self.kube.delete_pod(pod.namespace, pod.name, pod.uid or None, options.grace_period_seconds)
        except KubernetesApiError as err:
            return EvictionResponse(EvictionStatus.ERROR, 0, str(err), retryable=True)
        except KubernetesRejectedError as err:
            return EvictionResponse(EvictionStatus.ERROR, err.status, str(err), retryable=False)
        # A deleted finished pod is gone at once (the apiserver deletes terminal pods without grace), but the
        # watch confirms it; report it as accepted.
        return EvictionResponse(EvictionStatus.EVICTED if deleted else EvictionStatus.GONE, 200 if deleted else 404)


class _PodWatcher:
    """Feeds the drain's inbox from a watch on the node's pods, re-opening it when the apiserver ends it and
    re-listing (a snapshot) after an error or a 410 Gone. Runs on its own daemon thread until ``stop()`` or the
    deadline."""

    def __init__(
        self,
        kube: KubeAdapter,
        node_name: str,
        resource_version: str,
        deadline: Deadline,
        inbox: queue.Queue[tuple[str, Any]],
        stop_event: threading.Event,
        clock: Clock,
    ) -> None:
        self.kube = kube
        self.node_name = node_name
        self.resource_version = resource_version
        self.deadline = deadline
        self.inbox = inbox
        self.stop_event = stop_event
        self.clock = clock
        self._lock = threading.Lock()
        self._current: Any = None
        # runs in a copy of the creating thread's context, so its log lines carry the command's fields
        self._thread = threading.Thread(
            target=contextvars.copy_context().run, args=(self._run,), name=f"watch-{node_name}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.stop_event.set()
        with self._lock:
            if self._current is not None:
                self._current.close()

    def _run(self) -> None:
        failures = 0
        relist = not self.resource_version
        while not self.stop_event.is_set() and not self.deadline.expired:
            try:
                if relist:
                    pods, self.resource_version = self.kube.list_pods_on_node(self.node_name)
                    self.inbox.put(("snapshot", pods))
                    relist = False
                seconds = math.ceil(min(self.deadline.remaining(), MAX_WATCH_SECONDS))
                if seconds <= 0:
                    return
                watch = self.kube.watch_pods_on_node(self.node_name, self.resource_version, seconds)
                with self._lock:
                    self._current = watch
                    if self.stop_event.is_set():
                        watch.close()
                try:
                    for event in watch:
                        if event.type == "ERROR":
                            relist = True  # 410 Gone (resourceVersion too old) or another watch error
                            break
                        if event.resource_version:
                            self.resource_version = event.resource_version
                        if event.type != "BOOKMARK":
                            self.inbox.put(("event", event))
                finally:
                    with self._lock:
                        self._current = None
                    watch.close()
                failures = 0
            except NodeManagerError as err:
                if self.stop_event.is_set():
                    return
                failures += 1
                relist = True
                self.inbox.put(("watch_error", str(err)))
                self.clock.sleep(min(2.0, 0.1 * 2**failures, self.deadline.remaining()), self.stop_event)
            except Exception as err:
                log.exception("pod watcher on %s crashed", self.node_name)
                self.inbox.put(("watch_error", f"internal error: {err}"))
                return
