"""The drain engine: cordon, drain and uncordon one node, as ``kubectl drain`` / ``kubectl uncordon`` would.

The steps read like a runbook (``DrainEngine``): ``find_node`` (by ``spec.providerID``, never by name) →
``cordon_node`` (marking the cordon as ours) → ``list_pods_on_node`` → ``plan_drain`` (pure: what to do with each
pod, ``pod_disposition``) → ``evict_pods`` (parallel, through the Eviction API; PodDisruptionBudgets answer 429 and
are retried with backoff) → ``wait_until_gone`` (a watch on the node's pods, not polling) → ``NodeCommandResult``.

The package splits that by responsibility: ``policy`` (pure pod policy), ``cordon`` (pure cordon decisions),
``progress`` (the pure progress state machine), ``lookup`` (a command's node), ``results`` (result models),
``attempts`` (one pod's eviction retries, a state machine), ``evict`` (parallel evictions with backoff), ``watcher``
(the pod watch), ``running`` (the drains in progress: an uncordon command leaves the cordon of one), ``patch`` (a
cordon decision applied, a conflict decided again) and this module, the engine that runs a command through them.

Decisions are pure functions with their own tests: ``pod_disposition``, ``plan_drain``, ``decide_cordon``,
``decide_uncordon``, ``core.clock.backoff_delay``, and ``DrainProgress`` (a state machine fed with eviction
outcomes and watch events). Effects go through ``agent.kube.client.KubeAdapter``, the only module that talks to
the Kubernetes API.

A drain that emptied its node reads the node and its pods again before it concludes: found schedulable (its cordon,
or an operator's, undone during the drain), it cordons it as ours; pods placed there meanwhile, or re-created under
a gone pod's name, are evicted too.

Every wait is bounded by the command's deadline (``Deadline``, on an injectable ``Clock``). At the deadline the
drain ends ``timed_out`` listing the pods still there and why; the node stays cordoned (unless
``options.uncordon_on_failure`` and the cordon is still this command's, and never when the instance is ending: a
Spot warning or lifecycle action marked the node, ``agent.drain.cordon.ENDING_ANNOTATION``, or tightened the drain to
its deadline).

Every pod gets its shutdown inside the deadline: an eviction's grace period is capped to the time left minus
``DRAIN_GRACE_MARGIN_SECONDS``; a deadline-bound drain (Spot, lifecycle hook) under
``DRAIN_PDB_DEADLINE_POLICY=delete`` deletes the pods a PodDisruptionBudget still protects when their grace stops
fitting (``agent.drain.policy``). Each pod's outcome names the grace it got and why.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from datetime import datetime

from agent.drain.cordon import CordonDecision, UncordonDecision, decide_cordon, decide_release, decide_uncordon
from agent.drain.evict import Evictor
from agent.drain.guard import ControlPlaneGuard, LocalControlPlaneGuard
from agent.drain.lookup import node_of_instance
from agent.drain.patch import CORDON_CONFLICT_RETRIES, patch_until_applied
from agent.drain.policy import daemonset_owners, deletes_past_pdb, instance_ends, is_control_plane, plan_drain
from agent.drain.ports import BackoffSettings, DrainApi, ResultEvents
from agent.drain.progress import DrainProgress, conclude, refuse
from agent.drain.results import Durations, NodeCommandResult
from agent.drain.running import RunningDrain, RunningDrains
from agent.kube.views import NodeView, PodEvent
from core.clock import Clock, Deadline, SystemClock
from core.exceptions import NodeManagerError, RetryableError
from core.model import Command, CommandKind, CommandStatus, DrainOptions
from core.settings import PdbDeadlinePolicy

log = logging.getLogger(__name__)


class DrainEngine:
    """Runs cordon, drain and uncordon commands against one cluster.

    Args:
        kube: the Kubernetes adapter (built by the entry point).
        settings: eviction backoff (``eviction_backoff_seconds`` .. ``eviction_backoff_max_seconds``), the
            grace margin before a deadline (``drain_grace_margin_seconds``) and what deadline-bound drains do with
            pods a PodDisruptionBudget still protects (``drain_pdb_deadline_policy``);
            ``core.settings.AgentSettings`` fits.
        clock: time source (default ``SystemClock()``).
        events: posts the Kubernetes Event of each result on its Node (None: post none).
        max_workers: pods evicted in parallel per drain (each retries on its own, with its own backoff).
        max_requests_in_flight: eviction/delete requests sent at once, over all drains of this engine. Each
            concurrent request needs its own connection, and a new TLS connection costs the apiserver more CPU
            than a request on a warm one (here, 30 evictions: ~0.2 s with 4 connections, ~1 s with 32 new
            ones); the ApiClient's pool (``agent.kube.client.make_api_client``) keeps these connections warm.
        rand: jitter source in [0, 1).
        max_control_plane_drains, guard: which commands may touch a control-plane node and how many drain one at
            once (``agent.drain.guard``); without a ``guard``, a ``LocalControlPlaneGuard`` of this process.

    Thread-safe: several commands may run at once on one engine (each drain has its own pool and watch).
    """

    def __init__(
        self,
        kube: DrainApi,
        settings: BackoffSettings,
        clock: Clock | None = None,
        events: ResultEvents | None = None,
        max_workers: int = 32,
        max_requests_in_flight: int = 4,
        rand: Callable[[], float] = random.random,
        max_control_plane_drains: int = 1,
        guard: ControlPlaneGuard | None = None,
    ) -> None:
        self.kube = kube
        self.backoff_base = float(settings.eviction_backoff_seconds)
        self.backoff_cap = float(settings.eviction_backoff_max_seconds)
        self.clock: Clock = clock or SystemClock()
        self.events = events
        self.max_workers = max(1, max_workers)
        self._request_slots = threading.BoundedSemaphore(max(1, max_requests_in_flight))
        self.rand = rand
        self.pdb_deadline_policy = settings.drain_pdb_deadline_policy
        self.grace_margin = float(settings.drain_grace_margin_seconds)
        # command id -> its drain in progress (deadline, deadline-bound, tightened to an instance's end)
        self.running = RunningDrains()
        # the consumer's drains not finished, waiting for a slot included (``WorkerBase.drains_in_flight``): an
        # uncordon leaves their cordons too; by default none beyond ``running``
        self.drains_in_flight: Callable[[], frozenset[str]] = frozenset
        # which commands may touch a control-plane node, and how many drain one at once (agent.drain.guard)
        self.guard: ControlPlaneGuard = guard or LocalControlPlaneGuard(max_control_plane_drains)
        self._evictor = Evictor(
            kube,
            self.clock,
            self.backoff_base,
            self.backoff_cap,
            rand,
            self.max_workers,
            self._request_slots,
            grace_margin=self.grace_margin,
        )

    # ----------------------------------------------------------------------------------------- entry

    def run(self, command: Command) -> NodeCommandResult:
        """Execute ``command`` (kind drain, cordon or uncordon) and post its Event on the Node.

        Returns:
            the ``NodeCommandResult`` (status succeeded, timed_out or failed).

        Raises:
            NodeNotFoundError: no node has the providerID of ``command.instance_id`` (finish it ``skipped``).
            KubernetesApiError: the API failed (5xx, connection) before the work could be reported (retry).
            KubernetesRejectedError: the API refused a request for good (e.g. 403: the ClusterRole lacks a verb).
            ControlPlaneRefusedError, ControlPlaneBusyError: see ``agent.drain.guard`` (the node untouched).
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
            if is_control_plane(node.labels):
                self.guard.admit(command, node)  # refused or busy: raises, the node untouched
            try:
                result = self._cordon_and_maybe_drain(command, node, started_at, durations, t0)
            except RetryableError:
                raise  # a control-plane slot stays with the command for its retry (given back when it ends)
            except BaseException:
                self.guard.release(command.command_id)
                raise
            self.guard.release(command.command_id)  # the command is over: its control-plane slot (if any) is free
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

    def cordon(self, command: Command, scan: bool = True) -> tuple[NodeView, CordonDecision]:
        """The fast step of a drain, taken the moment its command is received (before it waits for a drain slot):
        find the node and cordon it. ``run`` later finds it cordoned as ours and goes on with the evictions.
        ``scan`` False: the node is looked up in the node watch's index only (a drain waiting for its node to
        register probes often: ``agent.consumer.steps.NodeWait``).

        Raises:
            NodeNotFoundError: no node has the instance's providerID. KubernetesApiError / KubernetesRejectedError:
                see ``KubeAdapter``. ControlPlaneRefusedError / ControlPlaneBusyError: a control-plane node this
                command may not touch, or may not yet (``agent.drain.guard``); it is left uncordoned.
        """
        node = self.find_node(command.instance_id, command.node_name, scan)
        if is_control_plane(node.labels):
            self.guard.admit(command, node)  # the slot is held until the drain ends (``run``) or is given back
        return self.cordon_node(node, command.command_id, ending=instance_ends(command.reason))

    def find_node(self, instance_id: str, node_name: str | None = None, scan: bool = True) -> NodeView:
        """``lookup.node_of_instance`` on this engine's cluster (raises ``NodeNotFoundError``)."""
        return node_of_instance(self.kube, instance_id, node_name, scan)

    def cordon_node(self, node: NodeView, command_id: str, ending: bool = False) -> tuple[NodeView, CordonDecision]:
        """Cordon ``node`` as ours unless someone else already did (``decide_cordon``; ``ending``: the command's
        instance is going away, ``instance_ends``, so the cordon is marked never to be undone); a conflicting write
        (409: the node changed since it was read) is re-read and re-decided (``agent.drain.patch``).

        Returns:
            the node as it is now, and the decision applied.

        Raises:
            KubernetesApiError: still conflicting after ``patch.CORDON_CONFLICT_RETRIES`` tries, or see
                ``KubeAdapter``. NodeNotFoundError: the node vanished meanwhile.
        """
        return patch_until_applied(self.kube, node, lambda n: decide_cordon(n, command_id, ending))

    def uncordon_node(self, node: NodeView) -> tuple[NodeView, UncordonDecision]:
        """Undo our cordon of ``node`` (``decide_uncordon``); someone else's is left alone, and so are the cordon of a
        node whose instance is ending and the cordon of a drain running in this engine (``self.running``) or cordoned
        by the consumer's fast step and waiting for a slot (``drains_in_flight``), both read at each decision.
        Conflicts as in ``cordon_node``."""
        return patch_until_applied(
            self.kube, node, lambda n: decide_uncordon(n, self.running.ids() | self.drains_in_flight())
        )

    def release_node(self, node: NodeView, command_id: str) -> tuple[NodeView, UncordonDecision]:
        """Give back the cordon ``command_id`` made (``decide_release``: only while our annotation still names that
        command); a conflict re-reads the node and decides again, so a cordon another command took over meanwhile
        is left. Errors as in ``cordon_node``."""
        return patch_until_applied(self.kube, node, lambda n: decide_release(n, command_id))

    def tighten(self, command_id: str, when: datetime) -> bool:
        """Bring the deadline of the drain of ``command_id`` in progress forward to ``when`` (never later), an
        instance's end (a Spot warning's deadline): its graces are capped by it and its waits end by it; under
        ``DRAIN_PDB_DEADLINE_POLICY=delete`` it deletes pods a PodDisruptionBudget still protects when their grace
        stops fitting, as a Spot drain does; if it does not succeed it keeps its cordon (whatever
        ``options.uncordon_on_failure``), marked ``ENDING_ANNOTATION`` (``mark_ending``). A drain started already
        tightened (``agent.consumer.decisions.tightened``) is made so at the first call. Returns False when no drain
        of that command runs here, or it is already bound to an end no later than ``when``. Thread-safe."""
        entry = self.running.get(command_id)
        if entry is None or (not entry.deadline.tighten(when) and entry.ending.is_set()):
            return False
        entry.ending.set()
        if self.pdb_deadline_policy == PdbDeadlinePolicy.DELETE:
            entry.bound.set()
        log.info("drain deadline tightened command_id=%s deadline=%s", command_id, when.isoformat())
        if entry.node:
            self.mark_ending(entry.node, command_id)
        return True

    def mark_ending(self, node_name: str, command_id: str) -> None:
        """Mark our cordon of ``node_name`` ``ENDING_ANNOTATION`` (``decide_cordon``, ``ending``; someone else's is
        left alone). Errors are logged, never raised: the drain's ``ending`` flag still keeps the cordon."""
        try:
            if (node := self.kube.get_node(node_name)) is not None:
                self.cordon_node(node, command_id, ending=True)
        except NodeManagerError as err:
            log.warning("cordon not marked ending command_id=%s node=%s error=%s", command_id, node_name, err)

    # --------------------------------------------------------------------------------------- kinds

    def _uncordon(
        self, command: Command, node: NodeView, started_at: datetime, durations: Durations
    ) -> NodeCommandResult:
        t = self.clock.monotonic()
        _, decision = self.uncordon_node(node)
        durations.cordon = self.clock.monotonic() - t
        durations.total = durations.resolve + durations.cordon
        return NodeCommandResult(
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
    ) -> NodeCommandResult:
        running = None
        if command.kind == CommandKind.DRAIN:  # recorded before its cordon: an uncordon never finds one alone
            running = RunningDrain(Deadline.at(command.deadline, self.clock), node=node.name)
            if deletes_past_pdb(self.pdb_deadline_policy, command.reason):
                running.bound.set()
        with self.running.holding(command.command_id, running):
            t = self.clock.monotonic()
            node, decision = self.cordon_node(node, command.command_id, ending=instance_ends(command.reason))
            durations.cordon = self.clock.monotonic() - t
            result = NodeCommandResult(
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
            if running is None:
                result.message = (
                    f"node {node.name} was already cordoned by someone else"
                    if decision.by_other
                    else f"cordoned node {node.name}"
                )
            else:
                self._drain_until(command, node, result, running)
        durations.total = self.clock.monotonic() - t0
        result.finished_at = self.clock.now()
        return result

    def _drain_until(self, command: Command, node: NodeView, result: NodeCommandResult, running: RunningDrain) -> None:
        options = command.options
        pods, resource_version = self.kube.list_pods_on_node(node.name)
        missing = frozenset(ds for ds in daemonset_owners(pods) if not self.kube.daemonset_exists(*ds))
        plan = plan_drain(pods, options, missing)
        progress = DrainProgress(plan)
        if plan.refused:
            refuse(result, plan, progress, node.name)
            self.uncordon_after_failure(options, node, result, ending=running.ending.is_set())
            return
        if progress.states:
            self._evictor.evict_and_wait(
                node, options, running.deadline, progress, resource_version, result.durations, running.bound.is_set
            )
        retaken = self._keep_cordoned(command, node, result, running, progress)
        conclude(result, progress, node.name)
        if retaken:
            result.message += f"; node {node.name} was uncordoned during the drain: cordoned again as ours"
        if result.status != CommandStatus.SUCCEEDED:
            self.uncordon_after_failure(options, node, result, ending=running.ending.is_set())

    def _keep_cordoned(
        self,
        command: Command,
        node: NodeView,
        result: NodeCommandResult,
        running: RunningDrain,
        progress: DrainProgress,
    ) -> bool:
        """Before a drain that emptied its node concludes, read the node and its pods again: schedulable (an operator
        uncordoned their cordon, or ours, during the drain), the node is cordoned as ours (``cordon_node``; ``result``
        says so); pods there the drain does not track (placed after its watch stopped, or re-created under a gone
        pod's name: ``DrainProgress.arrival``) are evicted as the watch's arrivals are, so none dies with the
        instance; at most ``patch.CORDON_CONFLICT_RETRIES`` rounds, while the deadline allows. True when it cordoned
        the node. An error is recorded in ``result.errors``, never raised."""
        retaken = False
        try:
            for _ in range(CORDON_CONFLICT_RETRIES):
                if progress.remaining() or running.deadline.expired:
                    break
                current = self.kube.get_node(node.name)
                if current is not None and not current.unschedulable:
                    ending = instance_ends(command.reason) or running.ending.is_set()
                    _, decision = self.cordon_node(current, command.command_id, ending=ending)
                    result.cordoned_by_us, result.cordoned_by_other, retaken = decision.ours, decision.by_other, True
                pods, version = self.kube.list_pods_on_node(node.name)
                if not [p for p in pods if progress.arrival(PodEvent("ADDED", p, version), command.options)]:
                    break
                more, bound = Durations(), running.bound.is_set
                self._evictor.evict_and_wait(node, command.options, running.deadline, progress, version, more, bound)
                result.durations.evict += more.evict
                result.durations.wait += more.wait
        except NodeManagerError as err:
            result.errors.append(f"checking the node again before the end: {err}")
        return retaken

    def uncordon_after_failure(
        self, options: DrainOptions, node: NodeView, result: NodeCommandResult, ending: bool = False
    ) -> None:
        """Give back the cordon of a drain that did not succeed, when ``options.uncordon_on_failure``: only while it
        is still this command's (``release_node``: a Spot drain that took the cordon over keeps it) and the node is
        not marked ending. ``ending``: a Spot warning tightened this drain to its instance's end (``tighten``; a drain
        the consumer starts already tightened comes with ``uncordon_on_failure`` off,
        ``agent.consumer.decisions.tightened``): the cordon is kept and said so in ``result.message``. An error is
        recorded in ``result.errors``, never raised."""
        if not (options.uncordon_on_failure and result.cordoned_by_us):
            return
        if ending:
            result.message = f"{result.message}; node {node.name} left cordoned: its instance is ending"
            return
        try:
            current = self.kube.get_node(node.name) or node
            _, decision = self.release_node(current, result.command_id)
            result.uncordoned = decision.patch is not None
        except NodeManagerError as err:
            result.errors.append(f"uncordon after failure: {err}")
