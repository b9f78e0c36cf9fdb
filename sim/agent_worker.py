"""The simulated agent's command side (``sim.agent``): ``SimWorker``, the product's ``CommandWorker`` whose drains do
not block a thread (a drain is handed to the agent's slots and ends on the simulation's clock, retried as the
product's ``retry.Retry`` retries it); ``ResultEngine``, the consumer's engine port answering a drain with the end its
``SimDrain`` reached; ``EventLog``, the EventBridge client stand-in for the agent's result events; ``RetryClock``, the
clock the worker's step retries (``retry.Retry``) wait on."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agent.consumer.decisions import deadline_passed
from agent.consumer.jobs import Job
from agent.consumer.steps import NodeWait, cordon_first, execute
from agent.consumer.worker import CommandWorker
from agent.drain.engine import DrainEngine
from agent.drain.results import NodeCommandResult
from core.clock import backoff_delay
from core.exceptions import ControlPlaneBusyError, NodeNotFoundError, RetryableError
from core.model import Command, CommandKind

if TYPE_CHECKING:
    from sim.agent import SimAgent


class EventLog:
    """An EventBridge client stand-in for the agent's result events (``put_events``): keeps every entry and hands
    it to ``emit`` (the simulation's bus), answering as PutEvents does when all entries are accepted."""

    def __init__(self, emit: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.entries: list[dict[str, Any]] = []
        self.emit = emit

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        for entry in Entries:
            self.entries.append(entry)
            if self.emit is not None:
                self.emit(entry)
        return {"FailedEntryCount": 0, "Entries": [{"EventId": f"e-{len(self.entries)}"} for _ in Entries]}


class RetryClock:
    """The clock of the agent's step retries (``agent.consumer.retry.Retry``: the ``CMD#`` read, start, terminal write
    and handback of ``CommandWorker``) on simulated time; nothing sleeps. A step runs inside one simulated instant, so
    its tries answer as the services do at that instant; each backoff ``sleep`` only moves this clock on, so the
    budget (``COMMAND_RETRY_SECONDS``, the command's deadline) is spent after as many tries as the product makes,
    whatever the wall clock does. ``monotonic`` is the kernel's time plus every backoff slept (never goes back)."""

    def __init__(self, now: Callable[[], float]) -> None:
        self.now = now
        self.slept = 0.0

    def sleep(self, seconds: float) -> None:
        self.slept += max(0.0, seconds)

    def monotonic(self) -> float:
        return self.now() + self.slept


class ResultEngine:
    """The consumer's ``Engine`` port: ``cordon`` and non-drain commands through the real ``DrainEngine`` at once; a
    drain's ``run`` answers the end its ``SimDrain`` reached (a result, or the exception it raised)."""

    def __init__(self, engine: DrainEngine) -> None:
        self.engine = engine
        self.ends: dict[str, NodeCommandResult | Exception] = {}

    @property
    def guard(self) -> Any:
        """The engine's control-plane guard: the worker gives a slot back when a command ends (``_finish``), a drain
        that ends without running too (its deadline passed after the cordon claimed the slot: resize seed 363299,
        whose slot was never given back here and refused every later master drain)."""
        return self.engine.guard

    def cordon(self, command: Command, scan: bool = True) -> Any:
        return self.engine.cordon(command, scan)

    def run(self, command: Command) -> Any:
        if command.kind is not CommandKind.DRAIN:
            return self.engine.run(command)
        end = self.ends.pop(command.command_id)
        if isinstance(end, Exception):
            raise end
        return end


class SimWorker(CommandWorker):
    """``CommandWorker`` whose drains do not block: after the fast cordon step a drain is handed to the agent's
    slots (``SimAgent.enqueue``) instead of waiting on ``DeadlineGate``."""

    agent: SimAgent

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._tries: dict[tuple[str, int], tuple[float, int]] = {}  # a drain's (first failure, tries) by attempt
        self.node_waits: set[str] = set()  # command ids of drains waiting for their node (``_cordon_first``)

    def _run_job(self, job: Job) -> None:
        job.lifecycle_beat_at = self.agent.kernel.t
        if job.command.kind is not CommandKind.DRAIN:
            super()._run_job(job)
            return
        self._cordon_first(job)

    def _cordon_first(self, job: Job, node_wait: NodeWait | None = None, scan: bool = True) -> None:
        """The fast step; a drain whose instance ends and has no node yet probes again as
        ``CommandWorker._cordon_or_wait`` does (``steps.NodeWait``), its job heartbeated meanwhile, until the wait
        or the deadline ends (then ``skipped``)."""
        command = job.command
        try:
            outcome = cordon_first(self.engine, command, self.metrics, job.ends, scan, node_wait is not None)
        except ControlPlaneBusyError:
            raise  # as before the wait: SimAgent.handle counts it, or back_off's action does (never a crash)
        except (NodeNotFoundError, RetryableError) as err:  # no node yet (a transient error only while probing)
            now = self.clock()
            node_wait = node_wait or NodeWait.start(job, now, self.config.node_wait_seconds, self.counters)
            left = node_wait.left(job, now)
            if left <= 0:
                outcome = node_wait.ended(command, err)
            else:
                pause, scan = node_wait.next_probe(left)
                wait = node_wait
                self.node_waits.add(command.command_id)
                self.agent.back_off(job, pause, then=lambda j: self._cordon_first(j, wait, scan))
                return
        self.node_waits.discard(command.command_id)
        if outcome is None and deadline_passed(command, self.clock()):
            outcome = execute(self.engine, command, self.clock(), self.config.max_command_seconds)
        if outcome is not None:
            self._finish(job, outcome)
            return
        self.agent.enqueue(job)

    def drains_in_flight(self) -> frozenset[str]:
        """``WorkerBase.drains_in_flight`` over the agent's jobs (a drain's job leaves ``jobs`` once it is enqueued)."""
        return frozenset(j.command.command_id for j in self.agent._jobs() if j.command.kind is CommandKind.DRAIN)

    def holds(self, command_id: str) -> bool:
        return self.job_for(command_id) is not None

    def job_for(self, command_id: str) -> Job | None:
        return next((job for job in self.agent._jobs() if job.command.command_id == command_id), None)

    def end_drain(self, job: Job, started: datetime) -> None:
        """The drain's end through ``steps.execute`` as of its start, then ``_finish``. A RetryableError is retried
        as ``_execute_or_give_back`` retries it (``retry.Retry``: backoff within ``command_retry_seconds`` and the
        deadline; here the drain runs again after a kernel delay), then the command is handed back after
        ``decisions.handback_delay``."""
        key = (job.command.command_id, job.attempt)
        try:
            outcome = execute(self.engine, job.command, started, self.config.max_command_seconds)
        except RetryableError as err:
            if not (job.closed or job.lost) and self._again(job, key, err):
                return
            self._tries.pop(key, None)
            if job.close():
                self.counters.inc("retried")
                self.give_back(job, visibility_seconds=self._delay(job.command, job.receive_count))
            return
        self._tries.pop(key, None)
        self._finish(job, outcome)

    def _again(self, job: Job, key: tuple[str, int], err: RetryableError) -> bool:
        """Run the drain again after ``Retry``'s backoff while the next try starts within its budget (and the
        command's deadline); False when the budget is spent."""
        first, tries = self._tries.get(key, (self.agent.kernel.t, 0))
        tries += 1
        delay = backoff_delay(tries, self.retry.base_seconds, self.retry.cap_seconds, self.agent._rand)
        limit = min(self.retry.budget_seconds, job.command.seconds_left(self.clock()))
        if self.agent.kernel.t - first + delay > limit:
            return False
        self._tries[key] = (first, tries)
        self._retried("run")(err)
        self.agent.back_off(job, delay)
        return True
