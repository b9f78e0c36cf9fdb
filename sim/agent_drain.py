"""One drain of the simulated agent on simulated time: the product's own drain rules, with the engine's threads
replaced by kernel actions.

``DrainEngine.run`` cordons, plans and then waits on threads (one per pod, plus a pod watch). Here the same steps
run through the same code: ``DrainEngine.find_node`` / ``cordon_node`` (``agent.drain.cordon.decide_cordon``),
``agent.drain.policy.plan_drain`` (kubectl drain's filters), ``agent.drain.progress.DrainProgress`` fed with the
cluster's pod events, one ``agent.drain.attempts.EvictionAttempts`` per pod whose retries (backoff from
``core.clock.backoff_delay`` with a kernel stream, a DELETE past a budget near a deadline-bound end) are scheduled
actions, the deadline (``core.clock.Deadline`` on the kernel's clock, tightened by a Spot warning), and the end
(``progress.conclude``, ``DrainEngine.uncordon_after_failure``). The Kubernetes side follows the Eviction API and
pod termination as ``sim.kube`` documents them.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import partial

from agent.drain.attempts import EvictionAttempts, send
from agent.drain.engine import DrainEngine
from agent.drain.policy import (
    PodAction,
    daemonset_owners,
    deletes_past_pdb,
    instance_ends,
    is_control_plane,
    plan_drain,
)
from agent.drain.progress import DrainProgress, conclude, refuse
from agent.drain.results import Durations, NodeCommandResult
from agent.drain.running import RunningDrain
from agent.kube.views import NodeView, PodEvent
from core.clock import Deadline
from core.exceptions import NodeManagerError
from core.model import Command, CommandKind, CommandStatus
from core.settings import PdbDeadlinePolicy
from sim.kernel import Kernel, Timer
from sim.kube import SimKube

DrainEnd = Callable[["SimDrain", "NodeCommandResult | Exception"], None]


class SimDrain:
    """A drain command run to its end on simulated time; ``on_end(drain, result)`` gets the ``NodeCommandResult``
    (or the exception ``DrainEngine.run`` would have raised: ``NodeNotFoundError``, ``KubernetesApiError``).

    Args:
        kernel, kube: the simulation.
        engine: the agent's real ``DrainEngine`` (its node lookups, cordon decisions and settings; never ``run``).
        command: the drain, its deadline already capped (``decisions.capped``).
        rand: the backoff's jitter source in [0, 1).
        control_plane_busy: how many control-plane drains of this agent run now (the engine's cap).
    """

    def __init__(
        self,
        kernel: Kernel,
        kube: SimKube,
        engine: DrainEngine,
        command: Command,
        rand: Callable[[], float],
        on_end: DrainEnd,
        control_plane_busy: Callable[[], int],
    ) -> None:
        assert command.kind is CommandKind.DRAIN
        self.kernel = kernel
        self.kube = kube
        self.engine = engine
        self.command = command
        self.rand = rand
        self.on_end = on_end
        self.control_plane_busy = control_plane_busy
        self.control_plane = False
        self.node: NodeView | None = None
        self.result: NodeCommandResult | None = None
        self.progress: DrainProgress | None = None
        self.deadline = Deadline.at(command.deadline, kernel)
        self.bound = deletes_past_pdb(engine.pdb_deadline_policy, command.reason)
        self.ending = False  # tightened to an instance's end: keeps its cordon if it does not succeed
        self.tries: dict[str, EvictionAttempts] = {}
        self.timers: list[Timer] = []
        self.ended = False
        self._check_due = False
        self._t0 = kernel.t

    # ----------------------------------------------------------------------------------------------- start

    def start(self) -> None:
        """Find and cordon the node, list and plan its pods, send the first requests (all at once, as the engine's
        workers do); an error ends the drain with it."""
        started_at = self.kernel.now()
        try:
            node = self.engine.find_node(self.command.instance_id, self.command.node_name)
            durations = Durations(resolve=0.0)
            if is_control_plane(node.labels):
                # the product's guard (agent.drain.guard): a command it refuses raises ControlPlaneRefusedError, a busy
                # slot ControlPlaneBusyError; either ends this drain with the error and the product's steps decide
                self.engine.guard.admit(self.command, node)
                self.control_plane = True
            # known to the engine as running (before its cordon, as ``DrainEngine.run`` does): an uncordon command
            # run meanwhile leaves its cordon (``DrainEngine.uncordon_node``)
            self.engine.running.add(self.command.command_id, RunningDrain(self.deadline, node.name))
            node, decision = self.engine.cordon_node(
                node, self.command.command_id, ending=instance_ends(self.command.reason)
            )
            self.node = node
            self.result = NodeCommandResult(
                command_id=self.command.command_id,
                kind=self.command.kind,
                instance_id=self.command.instance_id,
                node_name=node.name,
                status=CommandStatus.SUCCEEDED,
                cordoned_by_us=decision.ours,
                cordoned_by_other=decision.by_other,
                started_at=started_at,
                finished_at=started_at,
                durations=durations,
            )
            pods, _ = self.kube.list_pods_on_node(node.name)
            missing = frozenset(ds for ds in sorted(daemonset_owners(pods)) if not self.kube.daemonset_exists(*ds))
        except NodeManagerError as err:  # what DrainEngine.run raises, for the consumer's step to judge
            self._end(err)
            return
        plan = plan_drain(pods, self.command.options, missing)
        self.progress = DrainProgress(plan)
        if plan.refused:
            refuse(self.result, plan, self.progress, node.name)
            self.engine.uncordon_after_failure(self.command.options, node, self.result, ending=self.ending)
            self._end(self.result)
            return
        self.kube.listeners.append(self._on_event)
        e = self.engine
        for key, state in self.progress.states.items():
            if state.disposition.action in (PodAction.EVICT, PodAction.DELETE):
                self.tries[key] = EvictionAttempts(
                    state.pod,
                    state.disposition.action,
                    self.command.options,
                    e.backoff_base,
                    e.backoff_cap,
                    e.grace_margin,
                )
                self._after(0.0, "agent:evict", partial(self._try, key))
        self._after(self.deadline.remaining(), "agent:drain-deadline", self._check)
        self._want_check()

    # ----------------------------------------------------------------------------------------------- steps

    def tighten(self, when: datetime) -> bool:
        """``DrainEngine.tighten`` for this drain: the deadline moves earlier (never later) and, under
        ``DRAIN_PDB_DEADLINE_POLICY=delete``, the drain becomes deadline-bound; under either policy it keeps its
        cordon if it does not succeed, and the cordon is marked ending (``DrainEngine.mark_ending``). False when it
        did not move and was already so."""
        if self.ended:
            return False
        moved = self.deadline.tighten(when)
        if not moved and self.ending:
            return False
        self.ending = True
        if self.engine.pdb_deadline_policy == PdbDeadlinePolicy.DELETE:
            self.bound = True
        if self.node is not None:
            self.engine.mark_ending(self.node.name, self.command.command_id)
        if moved:
            self._after(self.deadline.remaining(), "agent:drain-deadline", self._check)
        return True

    def _try(self, key: str) -> None:
        if self.ended or self.progress is None:
            return
        tries = self.tries[key]
        if self.deadline.expired:
            self.progress.apply_update(tries.expired())
            self._want_check()
            return
        request = tries.request(self.deadline.remaining())
        response = send(self.kube, tries.pod, request)
        update, delay = tries.answer(
            request, response, self.kernel.now(), self.deadline.remaining, self.bound, self.rand
        )
        self.progress.apply_update(update)
        if delay is not None:
            self._after(min(delay, self.deadline.remaining()), "agent:evict-retry", lambda: self._try(key))
        self._want_check()

    def _on_event(self, node: str, event: PodEvent) -> None:
        if self.ended or self.progress is None or self.node is None or node != self.node.name:
            return
        self.progress.apply_event(event)
        arrived = self.progress.arrival(event, self.command.options)
        if arrived is not None:  # placed on the node after its cordon (DrainProgress.arrival): evicted too
            e = self.engine
            self.tries[arrived.pod.key] = EvictionAttempts(
                arrived.pod, PodAction.EVICT, self.command.options, e.backoff_base, e.backoff_cap, e.grace_margin
            )
            self._after(0.0, "agent:evict", partial(self._try, arrived.pod.key))
        self._want_check()

    def _want_check(self) -> None:
        if not self._check_due:
            self._check_due = True
            self._after(0.0, "agent:drain-check", self._check)

    def _check(self) -> None:
        self._check_due = False
        if self.ended or self.progress is None or self.result is None or self.node is None:
            return
        if not (self.progress.settled or self.deadline.expired):
            return
        conclude(self.result, self.progress, self.node.name)
        if self.result.status != CommandStatus.SUCCEEDED:
            self.engine.uncordon_after_failure(self.command.options, self.node, self.result, ending=self.ending)
        self._end(self.result)

    def _end(self, outcome: NodeCommandResult | Exception) -> None:
        if isinstance(outcome, NodeCommandResult):
            outcome.durations.total = self.kernel.t - self._t0
            outcome.finished_at = self.kernel.now()
        if self.control_plane:
            self.engine.guard.release(self.command.command_id)
        self.cancel()
        self.on_end(self, outcome)

    def cancel(self) -> None:
        """Stop without an end (the agent died): nothing more is sent, nothing reported."""
        self.ended = True
        self.engine.running.remove(self.command.command_id)
        for timer in self.timers:
            timer.cancel()
        self.timers.clear()
        if self._on_event in self.kube.listeners:
            self.kube.listeners.remove(self._on_event)

    def _after(self, delay: float, label: str, action: Callable[[], None]) -> None:
        self.timers = [t for t in self.timers if t.at >= self.kernel.t]
        self.timers.append(self.kernel.after(delay, label, action))
