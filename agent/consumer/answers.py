"""The command worker's state and its answers (``WorkerBase``, the base of ``worker.CommandWorker``): how a message
is left, given back, deleted or made visible again (``decisions.handback_delay``), what a refused start means for
it (``decisions.on_refusal``), a body no record backs (rejected), a drain's lifecycle action completed (never for a
refused control-plane drain), and what is counted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from adapters.aws.ports import CommandReceiver
from adapters.dynamo.store import Store
from agent.cloudwatch import CloudWatchPublisher
from agent.consumer.config import ConsumerConfig
from agent.consumer.decisions import (
    Binding,
    RefusalDisposition,
    completes_hook,
    handback_delay,
    on_refusal,
    pending_when_ended,
)
from agent.consumer.jobs import Counters, Job, Jobs
from agent.consumer.retry import Retry
from agent.consumer.schedule import CordonsFirst, DeadlineGate
from agent.consumer.steps import Engine
from agent.hooks import HookFinisher
from agent.metrics import AgentMetrics
from agent.report import Outcome, Reporter
from core.exceptions import RetryableError
from core.model import Command, CommandKind, CommandStatus

log = logging.getLogger(__name__)

PREVIEW_CHARS = 160


class WorkerBase:
    """The worker's state and its answers to SQS and the table (see ``CommandConsumer`` for the arguments).
    ``jobs`` holds the commands in flight, ``counters`` what happened."""

    def __init__(
        self,
        queue: CommandReceiver,
        store: Store,
        engine: Engine,
        reporter: Reporter,
        config: ConsumerConfig,
        clock: Callable[[], datetime],
        *,
        metrics: AgentMetrics | None = None,
        hooks: HookFinisher | None = None,
        alarms: CloudWatchPublisher | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.queue = queue
        self.store = store
        self.engine = engine
        self.reporter = reporter
        self.config = config
        self.clock = clock
        self.metrics = metrics
        self.hooks = hooks
        self.alarms = alarms
        self.counters = Counters()
        self.jobs = Jobs()
        self.gate = DeadlineGate(config.concurrency)
        self.cordons = CordonsFirst()  # evictions wait for the cordons of the commands received (a wave)
        if hasattr(engine, "drains_in_flight"):  # DrainEngine's: an uncordon leaves a waiting drain's cordon too
            engine.drains_in_flight = self.drains_in_flight
        self.sleep = sleep
        self.retry = Retry(
            config.command_retry_seconds, config.retry_backoff_seconds, config.retry_backoff_max_seconds, sleep=sleep
        )

    def drains_in_flight(self) -> frozenset[str]:
        """The command ids of this worker's drains not finished: running, or cordoned and waiting for a slot (the
        engine knows only the running ones: ``DrainEngine.uncordon_node`` asks this for the others)."""
        return frozenset(j.command.command_id for j in self.jobs.list() if j.command.kind is CommandKind.DRAIN)

    def _retried(self, step: str) -> Callable[[RetryableError], None]:
        def count(err: RetryableError) -> None:
            self.counters.inc(f"retry_{step}")
            self._error(err)
            if self.metrics is not None:
                self.metrics.command_retries.labels(step=step).inc()

        return count

    def _delay(self, command: Command, count: int) -> int:
        """``decisions.handback_delay`` for the ``count``-th receive of ``command``'s message."""
        left = command.seconds_left(self.clock()) if command.kind is CommandKind.DRAIN else None
        return handback_delay(count, self.config.retry_delay_seconds, self.config.handback_max_seconds, left)

    def _leave(self, receipt: str, message_id: str, command: Command, count: int, err: BaseException) -> None:
        """A retryable error outlasted the retries before the command started: the message comes back later
        (``_delay``); the item is untouched."""
        delay = self._delay(command, count)
        self.counters.inc("retried")
        log.warning(
            "retryable error, message left command_id=%s receive_count=%d retry_in=%ds error=%s",
            command.command_id,
            count,
            delay,
            err,
        )
        self.set_visibility(receipt, delay, message_id)

    def _rejected(self, message: Mapping[str, Any], binding: Binding) -> None:
        """A body no ``CMD#`` item backs (or one its item contradicts): not run, the item untouched, the message
        made visible again at once, so the queue's RedrivePolicy moves it to the dead-letter queue after
        ``maxReceiveCount`` receives (it is never deleted: the dead-letter queue keeps the evidence)."""
        assert binding.rejection is not None
        reason = binding.rejection.value
        message_id = str(message.get("MessageId", "?"))
        self.counters.inc(f"rejected_{reason}")
        if self.metrics is not None:
            self.metrics.commands_rejected.labels(reason=reason).inc()
        log.warning(
            "command rejected, not backed by its record; released for the dead-letter queue reason=%s "
            "message_id=%s receive_count=%s why=%r preview=%r",
            reason,
            message_id,
            message.get("Attributes", {}).get("ApproximateReceiveCount", "?"),
            binding.why,
            str(message.get("Body", ""))[:PREVIEW_CHARS],
        )
        self.set_visibility(str(message["ReceiptHandle"]), 0, message_id)

    def _complete_hook(
        self, command: Command, status: str, result: Mapping[str, Any] | None, ended: Mapping[str, Any] | None = None
    ) -> None:
        """CONTINUE the instance's lifecycle action after its drain ended, unless the drain was a control-plane
        drain the agent refused (``decisions.completes_hook``): Auto Scaling would terminate that master undrained.
        With ``ended`` (the ``CMD#`` item of a drain that ended before, e.g. read for a duplicate delivery) only an
        action that was pending by its ``finished_at`` (``decisions.pending_when_ended``): one recorded later waits
        for the drain queued for it."""
        assert self.hooks is not None
        if completes_hook(result):
            why = f"drain {command.command_id} {status}"
            if ended is None:
                self.hooks.complete(command.instance_id, why)
            else:
                finished_at = ended.get("finished_at")
                self.hooks.complete(
                    command.instance_id, why, lambda hook: self._pending_then(command, hook, finished_at)
                )
        else:
            log.warning(
                "control-plane drain refused, lifecycle action not completed command_id=%s instance_id=%s",
                command.command_id,
                command.instance_id,
            )

    def _pending_then(self, command: Command, hook: Mapping[str, Any], ended: Any) -> bool:
        """``decisions.pending_when_ended``, logged and counted (``hook_not_pending_at_end``) when False."""
        if pending_when_ended(hook, ended):
            return True
        self.counters.inc("hook_not_pending_at_end")
        log.warning(
            "duplicate of a finished drain: lifecycle action not completed, it was not pending when the drain ended "
            "(or a time is unreadable) command_id=%s instance_id=%s recorded_at=%r finished_at=%r",
            command.command_id,
            command.instance_id,
            hook.get("recorded_at"),
            ended,
        )
        return False

    def _refused(self, message_id: str, receipt: str, command: Command, current: Mapping[str, Any] | None) -> None:
        item = current or {}
        if self._adopt(message_id, receipt, command, item):
            return
        disposition, delay = on_refusal(
            current,
            self.clock().timestamp(),
            self.config.stale_running_seconds,
            self.config.visibility_timeout_seconds,
            message_id,
        )
        if disposition is RefusalDisposition.REDUNDANT:
            self.counters.inc("redundant")
            self._dropped("redundant")
            log.info(
                "command running under a live holder from another message, this copy deleted command_id=%s "
                "worker=%s holder_message_id=%s message_id=%s",
                command.command_id,
                item.get("worker"),
                item.get("message_id"),
                message_id,
            )
            self._delete(receipt, message_id)
        elif disposition is RefusalDisposition.DUPLICATE:
            self.counters.inc("duplicate")
            self._dropped("duplicate")
            log.info(
                "duplicate delivery of a finished command, message deleted command_id=%s status=%s message_id=%s",
                command.command_id,
                item.get("status"),
                message_id,
            )
            if command.kind is CommandKind.DRAIN and self.hooks is not None:
                # a worker that died between the drain's end and the hook's completion left it pending; an action
                # recorded after the drain ended is left to the drain queued for it
                self._complete_hook(command, str(item.get("status")), item.get("result"), ended=item)
            self._delete(receipt, message_id)
        elif disposition is RefusalDisposition.NOTIFY_AGAIN:
            self.counters.inc("notified_again")
            log.warning(
                "finished command was never notified, notifying now command_id=%s status=%s",
                command.command_id,
                item.get("status"),
            )
            notified = self.reporter.notify(
                command,
                CommandStatus(item["status"]),
                item.get("result") or {},
                int(item.get("attempt", 0)),
                str(item.get("worker", "")),
                post_node_event=False,
            )
            if command.kind is CommandKind.DRAIN and self.hooks is not None:
                # its worker died between the drain's end and the action's completion (which follows the notice), as
                # a duplicate's (above) may have; an action recorded after the drain ended is left to its own drain
                self._complete_hook(command, str(item.get("status")), item.get("result"), ended=item)
            if notified:
                self._delete(receipt, message_id)
        else:
            self.counters.inc("busy_elsewhere")
            log.info(
                "command busy elsewhere, message left command_id=%s status=%s worker=%s retry_in=%ds",
                command.command_id,
                item.get("status"),
                item.get("worker"),
                delay,
            )
            self.set_visibility(receipt, delay, message_id)

    def _adopt(self, message_id: str, receipt: str, command: Command, item: Mapping[str, Any]) -> bool:
        """The message of a job in flight here came back (its visibility lapsed: a heartbeat's extension failed or
        came late): the job takes the new receipt handle, the only one that extends or deletes the message now
        (SQS Developer Guide, "Amazon SQS message identifiers"), and its heartbeat keeps it invisible again. True
        when adopted; the receive is then neither a refusal nor a look spent."""
        if item.get("status") != CommandStatus.RUNNING.value or item.get("worker") != self.config.worker_id:
            return False
        job = self.job_for(command.command_id)
        if job is None or job.message_id != message_id or job.closed or job.lost:
            return False
        self._take_receipt(job, receipt, message_id)
        return True

    def _held_here(self, message_id: str, receipt: str, command: Command) -> bool:
        """Whether a live job of this worker (not handed back or lost; one writing its end holds it too, its
        heartbeat maybe stale after the table refused it) holds ``command``; if so this message
        is answered: the job's own message is adopted (its visibility lapsed), a copy (a Lambda's or the sweeper's
        re-send, the item looking stale while the table refused the job's heartbeats) is deleted as redundant, the
        job's own message covering its end. Never started again here: ``start_command`` takes a stale item over
        whoever holds it, and a second job of the command would drain its node beside the first (whose end would
        then be lost and give back a control-plane slot the second holds)."""
        job = self.job_for(command.command_id)
        if job is None or job.lost or (job.closed and not job.ending):
            return False
        if job.message_id == message_id:
            self._take_receipt(job, receipt, message_id)
            return True
        self.counters.inc("redundant")
        self._dropped("redundant")
        log.info(
            "command running here from another message, this copy deleted command_id=%s job_message_id=%s "
            "message_id=%s",
            command.command_id,
            job.message_id,
            message_id,
        )
        self._delete(receipt, message_id)
        return True

    def _take_receipt(self, job: Job, receipt: str, message_id: str) -> None:
        """The job's own message came back: the job takes its new receipt handle (the only one that extends or deletes
        it now) and keeps it invisible again."""
        command = job.command
        job.receipt = receipt
        self.counters.inc("adopted")
        log.warning(
            "own message came back while its command runs here, receipt adopted command_id=%s message_id=%s",
            command.command_id,
            message_id,
        )
        self.set_visibility(receipt, self.config.visibility_timeout_seconds, message_id)

    def job_for(self, command_id: str) -> Job | None:
        """The live job of this worker for ``command_id``, if any."""
        return self.jobs.get(command_id)

    def _observe(self, command: Command, outcome: Outcome) -> None:
        """Count a finished command (Prometheus) and a failed drain (CloudWatch)."""
        failed = outcome.status in (CommandStatus.FAILED, CommandStatus.TIMED_OUT)
        if command.kind is CommandKind.DRAIN and failed and self.alarms is not None:
            self.alarms.drain_failed()
        if self.metrics is None:
            return
        self.metrics.commands_completed.labels(kind=command.kind.value, result=outcome.status.value).inc()
        total = (outcome.result.get("durations") or {}).get("total")
        if command.kind is CommandKind.DRAIN and total is not None:
            self.metrics.drain_duration.labels(result=outcome.status.value).observe(float(total))

    def _error(self, err: BaseException) -> None:
        if self.metrics is not None:
            self.metrics.loop_error("consumer", err)

    def _dropped(self, reason: str) -> None:
        if self.metrics is not None:
            self.metrics.messages_dropped.labels(reason=reason).inc()

    def give_back(self, job: Job, visibility_seconds: int) -> None:
        """Return a started command to ``queued`` (so anyone may start it at once) and make its message visible."""
        command = job.command
        try:
            # retried (a throttled release would leave the command running here until its heartbeat is stale),
            # within the time the message stays away and, for a drain, its deadline
            self.retry.call(
                lambda: self.store.release_command(
                    command.command_id, self.config.worker_id, job.attempt, now=self.clock()
                ),
                "release",
                seconds_left=self._release_seconds(command, visibility_seconds),
                on_retry=self._retried("release"),
            )
        except Exception as err:
            self._error(err)
            log.exception("could not hand back command command_id=%s", job.command.command_id)
        self.set_visibility(job.receipt, visibility_seconds, job.message_id)

    def holds(self, command_id: str) -> bool:
        """Whether this worker has a live job for ``command_id`` (started and not yet ended or handed back)."""
        return self.jobs.holds(command_id)

    def _release_seconds(self, command: Command, visibility_seconds: int) -> float:
        """How long a handback's release may be retried: until its message is visible again (at least 1 s), and for
        a drain not past its deadline."""
        limit = float(max(1, visibility_seconds))
        if command.kind is CommandKind.DRAIN:
            limit = min(limit, command.seconds_left(self.clock()))
        return limit

    def _delete(self, receipt: str, message_id: str) -> None:
        try:
            self.queue.delete(receipt)
        except Exception as err:
            self._error(err)
            log.exception("delete_message failed message_id=%s", message_id)

    def set_visibility(self, receipt: str, seconds: int, message_id: str) -> None:
        try:
            self.queue.set_visibility(receipt, seconds)
        except Exception as err:
            self._error(err)
            log.exception("change_message_visibility failed message_id=%s seconds=%d", message_id, seconds)
