"""One message to its end, in a worker thread (see ``agent.consumer`` for the rules).

``CommandWorker.handle`` sorts the message (``decisions.parse_message``), binds it to the ``CMD#`` item a Lambda
recorded (``decisions.bind_to_record``: the stored command is what runs; a body no item backs, or one that differs
from its item, is rejected and left for the dead-letter queue), starts the command in its item, runs it through the
engine in two steps (``steps``: a drain's node is cordoned the moment the message is taken, then the drain waits
for a slot of ``schedule.DeadlineGate``, earliest deadline first, once the commands received with it are cordoned too:
``schedule.CordonsFirst``), reports it, completes the drain's lifecycle action,
and deletes the message or leaves it for redelivery. Each step's retryable errors are retried first (``retry.Retry``);
a control-plane drain that finds every control-plane slot held waits here for one, its node untouched.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from agent.consumer.answers import PREVIEW_CHARS, WorkerBase
from agent.consumer.decisions import (
    CONTROL_PLANE_REFUSED,
    DEADLINE_PASSED,
    MessageVerdict,
    bind_to_record,
    deadline_passed,
    own_result,
    parse_message,
    receive_count,
    tightened,
)
from agent.consumer.jobs import Job
from agent.consumer.schedule import urgent_drain
from agent.consumer.steps import NodeWait, cordon_first, execute
from agent.drain.policy import instance_ends
from agent.logs import command_context
from agent.report import Outcome
from core.clock import backoff_delay
from core.exceptions import (
    AwsRequestError,
    AwsUnavailableError,
    CommandTransitionError,
    ControlPlaneBusyError,
    NodeNotFoundError,
    RetryableError,
    StoreUnavailableError,
)
from core.model import Command, CommandKind, CommandStatus

log = logging.getLogger(__name__)


class CommandWorker(WorkerBase):
    """Takes messages to their end; shared by the consumer's worker threads (see ``CommandConsumer`` for the
    arguments). ``jobs`` holds the commands in flight, ``counters`` what happened."""

    def handle(self, message: Mapping[str, Any], cordoned: Callable[[], None] = lambda: None) -> None:
        """Take one received message to its end (see the module docstring). Runs in a worker thread. ``cordoned``
        gives back the message's hold on evictions (``CordonsFirst.hold``, taken by the receive loop): called once
        its node is cordoned (or the command has nothing to cordon); the loop calls it again when this returns.

        Raises:
            AwsRequestError and other non-retryable errors: from ``get_command`` or ``start_command``; the message is
                left and comes back. Retryable ones (``StoreUnavailableError`` ...) are retried, then the message is
                made visible again after ``decisions.handback_delay``.
        """
        message_id = str(message.get("MessageId", "?"))
        receipt = str(message["ReceiptHandle"])
        body = str(message.get("Body", ""))
        self.counters.inc("received")
        parsed = parse_message(body, self.config.cluster)
        if parsed.verdict is MessageVerdict.MALFORMED:
            self.counters.inc("malformed")
            self._dropped("malformed")
            log.warning(
                "malformed message, released for the dead-letter queue message_id=%s receive_count=%s "
                "why=%r preview=%r",
                message_id,
                message.get("Attributes", {}).get("ApproximateReceiveCount", "?"),
                parsed.why,
                body[:PREVIEW_CHARS],
            )
            self.set_visibility(receipt, 0, message_id)
            return
        command = parsed.command
        assert command is not None
        if parsed.verdict is MessageVerdict.FOREIGN:
            self.counters.inc("foreign")
            self._dropped("foreign")
            log.warning(
                "command for another cluster dropped message_id=%s command_id=%s %s",
                message_id,
                command.command_id,
                parsed.why,
            )
            self._delete(receipt, message_id)
            return
        if self.metrics is not None:
            self.metrics.commands_received.labels(kind=command.kind.value).inc()
        count = receive_count(message)
        with command_context(command_id=command.command_id, instance_id=command.instance_id, node=command.node_name):
            try:
                item = self.retry.call(
                    lambda: self.store.get_command(command.command_id),
                    "read",
                    seconds_left=self._unowned_seconds,
                    on_retry=self._retried("read"),
                )
            except RetryableError as err:
                self._leave(receipt, message_id, command, count, err)
                return
            binding = bind_to_record(command, item)
            if binding.command is None:
                self._rejected(message, binding)
                return
            # a Spot deadline, if one came
            started = tightened(binding.command, item)
            ends = started is not binding.command or instance_ends(started.reason)
            self._start(message_id, receipt, started, count, cordoned, ends=ends)

    @property
    def _unowned_seconds(self) -> float:
        """How long a step may retry before its command is a job: no heartbeat extends the message's visibility
        yet, so within half the visibility timeout (the message must not come back to another worker meanwhile)."""
        return self.config.visibility_timeout_seconds / 2

    def _start(
        self,
        message_id: str,
        receipt: str,
        command: Command,
        count: int = 1,
        cordoned: Callable[[], None] = lambda: None,
        ends: bool = False,
    ) -> None:
        """Start the command (``queued`` → ``running``) and work it, or say why not (``_refused``). ``ends``: its
        instance goes away at the deadline whatever the drain does (``Job.ends``)."""
        if self._held_here(message_id, receipt, command):
            return  # a live job here runs it: never a second start beside it
        # its own failed handback left it running under this worker: taken again when no job (nor another start of
        # a duplicate delivery) holds it here; else no one could start it before its heartbeat is stale
        retake = self.jobs.begin_start(command.command_id) and not self.holds(command.command_id)
        try:
            attempt = self.retry.call(
                lambda: self.store.start_command(
                    command,
                    self.config.worker_id,
                    self.config.stale_running_seconds,
                    self.config.command_ttl_seconds,
                    now=self.clock(),
                    retake_own=retake,
                    message_id=message_id,
                ),
                "start",
                seconds_left=self._unowned_seconds,
                on_retry=self._retried("start"),
            )
        except CommandTransitionError as err:
            self.jobs.end_start(command.command_id)
            self._refused(message_id, receipt, command, err.current)
            return
        except BaseException as err:
            self.jobs.end_start(command.command_id)
            if not isinstance(err, RetryableError):
                raise
            self._leave(receipt, message_id, command, count, err)
            return
        job = Job(message_id, receipt, command, attempt, receive_count=count, cordoned=cordoned, ends=ends)
        log.info(
            "command started command_id=%s kind=%s instance_id=%s attempt=%d message_id=%s",
            command.command_id,
            command.kind.value,
            command.instance_id,
            attempt,
            message_id,
        )
        self.jobs.add(job)
        self.jobs.end_start(command.command_id)
        try:
            self._run_job(job)
        finally:
            self.jobs.remove(job)

    def _run_job(self, job: Job) -> None:
        """Cordon a drain's node at once (the fast step), wait for a drain slot (earliest deadline first, until the
        drain's deadline), drain; other kinds run at once (each is one node patch). Then finish the job."""
        command = job.command
        if command.kind is not CommandKind.DRAIN:
            outcome = self._execute_or_give_back(job)
            job.cordoned()
        else:
            outcome = self._cordon_or_wait(job)
            job.cordoned()
            if outcome is None and (job.closed or job.lost):
                return  # handed back (shutdown) or taken over while it waited for a control-plane slot
            if outcome is None and deadline_passed(job.command, self.clock()):
                outcome = execute(
                    self.engine, job.begin_run(), self.clock(), self.config.max_command_seconds
                )  # cordoned; nothing to evict for
            if outcome is None:
                self.cordons.wait(cancelled=lambda: job.closed or job.lost)  # the wave's other nodes cordoned first
                outcome = self._drain_in_slot(job)
        if outcome is not None:
            self._finish(job, outcome)

    def _drain_in_slot(self, job: Job) -> Outcome | None:
        """Wait for a drain slot (``schedule.DeadlineGate``, earliest deadline first) until the drain's deadline
        (invariant 8: every wait has a deadline), then drain in it; a drain whose instance ends at a deadline within
        ``urgent_seconds`` waits for none (``schedule.urgent_drain``, counted ``urgent_over_bound`` when every slot
        was held). A drain whose deadline passes while it waits is
        not run: it ends as one whose deadline passed before it started (``steps.execute``: ``timed_out``, "deadline
        passed before start", its node left cordoned). None when the job was handed back or taken over meanwhile
        (nothing to finish), or when the drain's retryable errors handed it back (``_execute_or_give_back``)."""
        command_id = job.command.command_id

        def over() -> bool:  # polled by the gate; ``job.command`` may be tightened meanwhile (``tighten_waiting``)
            return job.closed or job.lost or deadline_passed(job.command, self.clock())

        def urgent() -> bool:
            return urgent_drain(job.ends, job.command.deadline, self.clock(), self.config.urgent_seconds)

        over_bound: list[bool] = []
        if not self.gate.acquire(
            job.command.deadline, cancelled=over, key=command_id, urgent=urgent, over_bound=over_bound
        ):
            if job.closed or job.lost:
                log.info("drain handed back or taken over before it started command_id=%s", command_id)
                return None
            return execute(self.engine, job.begin_run(), self.clock(), self.config.max_command_seconds)  # too late
        if over_bound:
            self.counters.inc("urgent_over_bound")
            log.info("drain started over the drain slots: its instance ends soon command_id=%s", command_id)
        try:
            return self._execute_or_give_back(job)
        finally:
            self.gate.release()

    def tighten_waiting(self, job: Job, item: Mapping[str, Any] | None) -> bool:
        """A drain tightened by a Spot warning (``deadline_tightened_to`` in its ``CMD#`` ``item``) before the engine
        runs it (``DrainEngine.tighten`` knows no such drain): the job's command takes the earlier deadline with
        ``uncordon_on_failure`` off (``Job.tighten``), its place among the drains waiting for a slot moves with it
        (``DeadlineGate.retarget``), and its node's cordon, written by the fast step, is marked instance-ending now
        (``DrainEngine.mark_ending``, when the engine has it and the command names its node; else the heartbeat's
        first ``tighten`` once it runs marks it). Called by the heartbeat. False when nothing changed."""
        command = job.tighten(item)
        if command is None:
            return False
        self.gate.retarget(command.command_id, command.deadline)
        log.info(
            "waiting drain's deadline tightened command_id=%s deadline=%s",
            command.command_id,
            command.deadline.isoformat(),
        )
        mark_ending = getattr(self.engine, "mark_ending", None)  # DrainEngine's; a stand-in engine may have none
        if mark_ending is not None and command.node_name:
            mark_ending(command.node_name, command.command_id)
        return True

    def _cordon_or_wait(self, job: Job) -> Outcome | None:
        """``steps.cordon_first``; a drain whose instance ends and has no node yet waits for one to register
        (``steps.NodeWait``: probes every 2 s, until ``node_wait_seconds`` or its deadline, then ``skipped``); a
        control-plane drain whose slots are all held (``ControlPlaneBusyError``) waits here, its node untouched, and
        tries again with backoff (``retry_delay_seconds`` doubled, at most ``control_plane_poll_seconds``) until its
        deadline. Meanwhile the heartbeat keeps its message invisible and its instance's lifecycle action alive (never
        completed: a master must not go undrained). Past the deadline it ends ``timed_out``, marked
        ``control_plane_refused`` (the action is left to its own timeout)."""
        command = job.command
        tries = 0
        node_wait: NodeWait | None = None
        scan = True
        while True:
            try:
                probing = node_wait is not None
                return cordon_first(self.engine, command, self.metrics, job.ends, scan, probing)
            except ControlPlaneBusyError as err:
                job.cordoned()  # this one waits for a control-plane slot, the others need not wait for it
                tries += 1
                if tries == 1:
                    self.counters.inc("control_plane_busy")
                    if self.metrics is not None:
                        self.metrics.control_plane_refusals.labels(reason="busy").inc()
                    log.warning("control-plane drain waits for a slot command_id=%s: %s", command.command_id, err)
                left = job.command.seconds_left(self.clock())  # tightened meanwhile, maybe
                if left <= 0:
                    result = own_result(command, CommandStatus.TIMED_OUT, f"{DEADLINE_PASSED}: {err}")
                    return Outcome(CommandStatus.TIMED_OUT, {**result, CONTROL_PLANE_REFUSED: True}, False)
                pause = backoff_delay(tries, self.config.retry_delay_seconds, self.config.control_plane_poll_seconds)
                if not self._pause(min(pause, left), job):
                    return None
            except (NodeNotFoundError, RetryableError) as err:  # no node yet (a transient error only while probing)
                job.cordoned()  # nothing to cordon yet: the others need not wait for it
                node_wait = node_wait or NodeWait.start(job, self.clock(), self.config.node_wait_seconds, self.counters)
                left = node_wait.left(job, self.clock())
                if left <= 0:
                    return node_wait.ended(command, err)
                pause, scan = node_wait.next_probe(left)
                if not self._pause(pause, job):
                    return None

    def _pause(self, seconds: float, job: Job) -> bool:
        """Sleep ``seconds`` in short steps; False as soon as the job is handed back or lost."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            if job.closed or job.lost:
                return False
            self.sleep(min(0.5, left))
        return not (job.closed or job.lost)

    def _execute_or_give_back(self, job: Job) -> Outcome | None:
        """``steps.execute``, its retryable errors retried (``retry.Retry``); None when they outlasted the retries
        and the command was handed back (visible again after ``decisions.handback_delay``)."""
        command = job.begin_run()  # as tightened while it waited; from now on the engine's ``tighten`` applies
        try:
            return self.retry.call(
                lambda: execute(self.engine, command, self.clock(), self.config.max_command_seconds),
                "run",
                seconds_left=command.seconds_left(self.clock()) if command.kind is CommandKind.DRAIN else None,
                on_retry=self._retried("run"),
                cancelled=lambda: job.closed or job.lost,
            )
        except RetryableError as err:
            if job.close():
                delay = self._delay(command, job.receive_count)
                log.warning(
                    "retryable error, command handed back command_id=%s receive_count=%d delay=%ds error=%s",
                    command.command_id,
                    job.receive_count,
                    delay,
                    err,
                )
                self.counters.inc("retried")
                self.give_back(job, visibility_seconds=delay)
            return None

    def _finish(self, job: Job, outcome: Outcome) -> None:
        """Report the command's end, complete a drain's lifecycle action, delete the message (or leave it)."""
        command = job.command
        if not job.close():
            log.warning(
                "command ended after it was handed back, result dropped command_id=%s status=%s",
                command.command_id,
                outcome.status.value,
            )
            return
        job.ending = True  # a copy received until its end is written is no second start (``_held_here``)
        guard = getattr(self.engine, "guard", None)  # DrainEngine's; a stand-in engine may have none
        if guard is not None and not job.lost:
            guard.release(command.command_id)  # it ended: a control-plane slot it still holds is free
        try:
            notified = self.retry.call(
                lambda: self.reporter.report(command, self.config.worker_id, job.attempt, outcome),
                "report",
                on_retry=self._retried("report"),
            )
        except CommandTransitionError as err:
            current = err.current or {}
            log.warning(
                "lost the command before finishing it command_id=%s attempt=%d now=%s/%s/attempt %s",
                command.command_id,
                job.attempt,
                current.get("status"),
                current.get("worker"),
                current.get("attempt"),
            )
            self.counters.inc("lost")
            return
        except (StoreUnavailableError, AwsUnavailableError, AwsRequestError) as err:
            self._error(err)  # the table refused or garbled the write: the message comes back, the end is retried
            log.exception(
                "could not write the terminal status, message left for redelivery command_id=%s", command.command_id
            )
            self.counters.inc("errors")
            self.set_visibility(job.receipt, self._delay(command, job.receive_count), job.message_id)
            return
        self.counters.inc(outcome.status.value)
        node = outcome.result.get("node_name") or command.node_name
        with command_context(node=node or None):
            log.info(
                "command finished command_id=%s status=%s attempt=%d message=%r",
                command.command_id,
                outcome.status.value,
                job.attempt,
                outcome.result.get("message", ""),
            )
            self._observe(command, outcome)
            if command.kind is CommandKind.DRAIN and self.hooks is not None:
                self._complete_hook(command, outcome.status.value, outcome.result)
        if notified:
            self._delete(job.receipt, job.message_id)
        else:
            log.warning("event not sent, message left so the notification is retried command_id=%s", command.command_id)
