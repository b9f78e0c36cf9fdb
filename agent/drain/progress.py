"""The drain's progress (pure): a state machine fed with eviction answers, watch events and re-list snapshots.

``DrainEngine`` owns one ``DrainProgress`` per drain and feeds it from its inbox; it says when the drain is
settled, which pods remain and why, and what happened to each pod (``PodOutcome``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from agent.drain.policy import DrainPlan, Grace, GraceSource, PodAction, PodDisposition, pod_disposition
from agent.drain.results import NodeCommandResult, PodOutcome, RemainingPod
from agent.kube.eviction import EvictionResponse, EvictionStatus
from agent.kube.views import PodEvent, PodView
from core.model import CommandStatus, DrainOptions


@dataclass(frozen=True)
class EvictionUpdate:
    """A message from an eviction worker: the latest answer for a pod; ``final`` once the worker stopped."""

    key: str
    attempts: int
    response: EvictionResponse | None
    final: bool
    at: datetime | None = None
    error: str | None = None  # set when the worker gave up
    grace: Grace | None = None  # the grace the answered request carried (None: a finished pod's plain DELETE)
    sent: bool = False  # an announcement: a request carrying ``grace`` is about to be sent (no answer yet)
    uid: str = ""  # the pod's the request named: an update for a pod since replaced under its name is dropped


@dataclass
class PodState:
    """One tracked pod (evict, delete or wait) as the drain knows it so far."""

    pod: PodView
    disposition: PodDisposition
    attempts: int = 0
    evicted_at: datetime | None = None
    gone: bool = False
    worker_done: bool = False
    failed: str | None = None
    last: EvictionResponse | None = None
    grace: Grace | None = None  # of the accepted eviction (or deletion past a PodDisruptionBudget)
    announced: Grace | None = None  # of the request in flight (``EvictionUpdate.sent``), until its answer


class DrainProgress:
    """The drain's bookkeeping (pure: fed with ``EvictionUpdate``s, watch ``PodEvent``s and re-list snapshots).

    A pod is *gone* when a DELETED event carries its uid, when a pod of the same name with another uid shows up
    (it was replaced: the new one is an ``arrival``, its predecessor kept in ``replaced`` for the outcomes), or when
    a re-list no longer has its uid. The drain is *settled* when every tracked pod (evict, delete, wait) is gone or
    its worker gave up.
    """

    def __init__(self, plan: DrainPlan) -> None:
        self.states: dict[str, PodState] = {}
        self.others: list[tuple[PodView, PodDisposition]] = []
        self.replaced: list[PodState] = []  # gone pods whose name a later pod took (``arrival``)
        for pod, disposition in plan.decisions:
            if disposition.action in (PodAction.EVICT, PodAction.DELETE, PodAction.WAIT):
                state = PodState(pod, disposition, worker_done=disposition.action == PodAction.WAIT)
                self.states[pod.key] = state
            else:
                self.others.append((pod, disposition))
        self.last_eviction_done: float | None = None

    def apply_update(self, update: EvictionUpdate) -> None:
        state = self.states.get(update.key)
        if state is None or (update.uid and update.uid != state.pod.uid):
            return
        state.attempts = update.attempts
        if update.sent:
            # Announced before the request leaves, so it precedes on the inbox the watch's DELETED event the
            # request may cause: a pod gone before its answer arrives is named with the grace that removed it.
            state.announced = update.grace
            return
        if update.response is not None:
            state.last = update.response
            state.announced = None  # answered: the answer says what the request did
            if update.response.status == EvictionStatus.EVICTED and state.evicted_at is None:
                state.evicted_at = update.at
                state.grace = update.grace
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
            self._gone(state)

    @staticmethod
    def _gone(state: PodState) -> None:
        """The pod is gone: before its request's answer (``announced``), named with that request's grace."""
        state.gone = True
        if state.evicted_at is None and state.grace is None:
            state.grace = state.announced

    def arrival(self, event: PodEvent, options: DrainOptions) -> PodState | None:
        """A pod the drain's watch sees on the node that the drain did not list: one placed there after the cordon
        by a scheduler whose view of the node had not caught up with it yet (the cordon only keeps the scheduler
        away, and only once it has seen it). Tracked, and returned, when ``pod_disposition`` evicts it (a pod that
        stays, such as a DaemonSet's, is not tracked), so it leaves with the others instead of dying with the
        instance; so is a pod re-created under the name of a tracked pod that is gone (a StatefulSet's: another uid),
        the gone one kept in ``replaced``. None otherwise (a pod already tracked, terminating, or gone). Pure."""
        pod = event.pod
        if pod is None or event.type not in ("ADDED", "MODIFIED"):
            return None
        tracked = self.states.get(pod.key)
        if tracked is not None and (tracked.pod.uid == pod.uid or not tracked.gone):
            return None
        if pod.deletion_timestamp is not None or pod.phase in ("Succeeded", "Failed"):
            return None
        disposition = pod_disposition(pod, options)
        if disposition.action is not PodAction.EVICT:
            return None
        state = PodState(pod, PodDisposition(PodAction.EVICT, f"{disposition.reason}; arrived after the cordon"))
        if tracked is not None:
            self.replaced.append(tracked)
        self.states[pod.key] = state
        return state

    def apply_snapshot(self, pods: Iterable[PodView]) -> None:
        present = {(p.key, p.uid) for p in pods}
        for key, state in self.states.items():
            if (key, state.pod.uid) not in present:
                self._gone(state)

    @property
    def settled(self) -> bool:
        return all(s.gone or (s.worker_done and s.failed is not None) for s in self.states.values())

    @property
    def evictions_done(self) -> bool:
        return all(s.worker_done or s.gone for s in self.states.values())

    def failures(self) -> list[PodState]:
        return [s for s in self.states.values() if s.failed is not None and not s.gone]

    def remaining(self) -> list[RemainingPod]:
        out = []
        for state in self.states.values():
            if state.gone:
                continue
            out.append(RemainingPod(namespace=state.pod.namespace, name=state.pod.name, why=self._why(state)))
        return out

    @staticmethod
    def _why(state: PodState) -> str:
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
        for state in [*self.replaced, *self.states.values()]:
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
                    grace_seconds=state.grace.seconds if state.grace else None,
                    grace_source=state.grace.source if state.grace else None,
                )
            )
        return out


def counts_text(progress: DrainProgress) -> str:
    """What a drain did to its pods, in one phrase for the result message (evicted, deleted, skipped, graces)."""
    gone = dict.fromkeys((PodAction.EVICT, PodAction.DELETE, PodAction.WAIT), 0)
    tracked = [*progress.replaced, *progress.states.values()]
    for state in tracked:
        if state.gone:
            gone[state.disposition.action] += 1
    skipped = sum(1 for _, d in progress.others if d.action == PodAction.SKIP)
    graces = [s.grace.source for s in tracked if s.grace is not None]
    capped = graces.count(GraceSource.DEADLINE)
    past_pdb = graces.count(GraceSource.PDB_DEADLINE)
    extra = f", {capped} with grace capped by the deadline" if capped else ""
    extra += f", {past_pdb} deleted past their PodDisruptionBudget at the deadline" if past_pdb else ""
    return (
        f"{gone[PodAction.EVICT]} evicted, {gone[PodAction.DELETE]} finished deleted, "
        f"{gone[PodAction.WAIT]} already terminating, {skipped} skipped{extra}"
    )


def refuse(result: NodeCommandResult, plan: DrainPlan, progress: DrainProgress, node_name: str) -> None:
    """Fill ``result`` for a drain whose plan refused pods (``plan.refused``): failed, nothing evicted. Pure."""
    refused = ", ".join(f"{pod.key} ({d.reason})" for pod, d in plan.refused)
    result.status = CommandStatus.FAILED
    result.message = f"drain of {node_name} refused, nothing evicted: {refused}"
    result.pods = progress.outcomes()
    result.remaining = [
        RemainingPod(namespace=pod.namespace, name=pod.name, why=f"refused: {d.reason}") for pod, d in plan.refused
    ]


def conclude(result: NodeCommandResult, progress: DrainProgress, node_name: str) -> None:
    """Fill ``result`` from a drain's progress once it settled or its deadline passed (pure): succeeded when no
    tracked pod remains, failed when an eviction gave up, else timed out listing (up to 10 of) the pods left."""
    result.pods = progress.outcomes()
    result.remaining = progress.remaining()
    failures = progress.failures()
    counts = counts_text(progress)
    if not result.remaining:
        result.status = CommandStatus.SUCCEEDED
        result.message = f"drained node {node_name}: {counts}"
    elif failures:
        result.status = CommandStatus.FAILED
        result.errors = [f"{s.pod.key}: {s.failed}" for s in failures]
        result.message = f"drain of {node_name} failed: {len(failures)} pod(s) could not be evicted; {counts}"
    else:
        result.status = CommandStatus.TIMED_OUT
        result.message = f"drain of {node_name} timed out with {len(result.remaining)} pod(s) left: " + ", ".join(
            f"{r.namespace}/{r.name} ({r.why})" for r in result.remaining[:10]
        )
