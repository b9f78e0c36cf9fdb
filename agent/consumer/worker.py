"""One message to its end, in a worker thread (see ``agent.consumer`` for the rules).

``CommandWorker.handle`` sorts the message (``decisions.parse_message``), binds it to the ``CMD#`` item a Lambda
recorded (``decisions.bind_to_record``: the stored command is what runs; a body no item backs, or one that differs
from its item, is rejected and left for the dead-letter queue), starts the command in its item, runs it through the
engine in two steps (``steps``: a drain's node is cordoned the moment the message is taken, then the drain waits
for a slot of ``schedule.DeadlineGate``, earliest deadline first), reports it, completes the drain's lifecycle action,
and deletes the message or leaves it for redelivery.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from adapters.aws.ports import CommandReceiver
from adapters.dynamo.store import Store
from agent.cloudwatch import CloudWatchPublisher
from agent.consumer.config import ConsumerConfig
from agent.consumer.decisions import (
    Binding,
    MessageVerdict,
    RefusalDisposition,
    bind_to_record,
    deadline_passed,
    on_refusal,
    parse_message,
    tightened,
)
from agent.consumer.jobs import Counters, Job, Jobs
from agent.consumer.schedule import DeadlineGate
from agent.consumer.steps import Engine, cordon_first, execute
from agent.hooks import HookFinisher
from agent.logs import command_context
from agent.metrics import AgentMetrics
from agent.report import Outcome, Reporter
from core.exceptions import (
    AwsRequestError,
    AwsUnavailableError,
    CommandTransitionError,
    RetryableError,
    StoreUnavailableError,
)
from core.model import Command, CommandKind, CommandStatus

log = logging.getLogger(__name__)

PREVIEW_CHARS = 160


class CommandWorker:
    """Takes messages to their end; shared by the consumer's worker threads (see ``CommandConsumer`` for the
    arguments). ``jobs`` holds the commands in flight, ``counters`` what happened."""

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

    def handle(self, message: Mapping[str, Any]) -> None:
        """Take one received message to its end (see the module docstring). Runs in a worker thread.

        Raises:
            StoreUnavailableError, botocore errors: from ``get_command`` or ``start_command``; the message is left
                and comes back.
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
        with command_context(command_id=command.command_id, instance_id=command.instance_id, node=command.node_name):
            item = self.store.get_command(command.command_id)
            binding = bind_to_record(command, item)
            if binding.command is None:
                self._rejected(message, binding)
                return
            self._start(message_id, receipt, tightened(binding.command, item))  # a Spot deadline, if one came

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

    def _start(self, message_id: str, receipt: str, command: Command) -> None:
        """Start the command (``queued`` → ``running``) and work it, or say why not (``_refused``)."""
        try:
            attempt = self.store.start_command(
                command,
                self.config.worker_id,
                self.config.stale_running_seconds,
                self.config.command_ttl_seconds,
                now=self.clock(),
            )
        except CommandTransitionError as err:
            self._refused(message_id, receipt, command, err.current)
            return
        job = Job(message_id, receipt, command, attempt)
        log.info(
            "command started command_id=%s kind=%s instance_id=%s attempt=%d message_id=%s",
            command.command_id,
            command.kind.value,
            command.instance_id,
            attempt,
            message_id,
        )
        self.jobs.add(job)
        try:
            self._run_job(job)
        finally:
            self.jobs.remove(job)

    def _run_job(self, job: Job) -> None:
        """Cordon a drain's node at once (the fast step), wait for a drain slot (earliest deadline first), drain;
        other kinds run at once (each is one node patch). Then finish the job."""
        command = job.command
        if command.kind is not CommandKind.DRAIN:
            outcome = self._execute_or_give_back(job)
        else:
            outcome = cordon_first(self.engine, command, self.metrics)
            if outcome is None and deadline_passed(command, self.clock()):
                outcome = execute(
                    self.engine, command, self.clock(), self.config.max_command_seconds
                )  # cordoned; nothing to evict for
            if outcome is None:
                if not self.gate.acquire(command.deadline, cancelled=lambda: job.closed or job.lost):
                    log.info("drain handed back or taken over before it started command_id=%s", command.command_id)
                    return
                try:
                    outcome = self._execute_or_give_back(job)
                finally:
                    self.gate.release()
        if outcome is not None:
            self._finish(job, outcome)

    def _execute_or_give_back(self, job: Job) -> Outcome | None:
        """``steps.execute``; None when a retryable error handed the command back."""
        try:
            return execute(self.engine, job.command, self.clock(), self.config.max_command_seconds)
        except RetryableError as err:
            if job.close():
                log.warning(
                    "retryable error, command handed back command_id=%s delay=%ds error=%s",
                    job.command.command_id,
                    self.config.retry_delay_seconds,
                    err,
                )
                self.counters.inc("retried")
                self.give_back(job, visibility_seconds=self.config.retry_delay_seconds)
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
        try:
            notified = self.reporter.report(command, self.config.worker_id, job.attempt, outcome)
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
                self.hooks.complete(command.instance_id, f"drain {command.command_id} {outcome.status.value}")
        if notified:
            self._delete(job.receipt, job.message_id)
        else:
            log.warning("event not sent, message left so the notification is retried command_id=%s", command.command_id)

    def _refused(self, message_id: str, receipt: str, command: Command, current: Mapping[str, Any] | None) -> None:
        disposition, delay = on_refusal(
            current, self.clock().timestamp(), self.config.stale_running_seconds, self.config.visibility_timeout_seconds
        )
        item = current or {}
        if disposition is RefusalDisposition.DUPLICATE:
            self.counters.inc("duplicate")
            self._dropped("duplicate")
            log.info(
                "duplicate delivery of a finished command, message deleted command_id=%s status=%s message_id=%s",
                command.command_id,
                item.get("status"),
                message_id,
            )
            if command.kind is CommandKind.DRAIN and self.hooks is not None:
                # a worker that died between the drain's end and the hook's completion left it pending
                self.hooks.complete(command.instance_id, f"drain {command.command_id} {item.get('status')}")
            self._delete(receipt, message_id)
        elif disposition is RefusalDisposition.NOTIFY_AGAIN:
            self.counters.inc("notified_again")
            log.warning(
                "finished command was never notified, notifying now command_id=%s status=%s",
                command.command_id,
                item.get("status"),
            )
            if self.reporter.notify(
                command,
                CommandStatus(item["status"]),
                item.get("result") or {},
                int(item.get("attempt", 0)),
                str(item.get("worker", "")),
                post_node_event=False,
            ):
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
        now = self.clock()
        try:
            self.store.release_command(job.command.command_id, self.config.worker_id, job.attempt, now=now)
        except Exception as err:
            self._error(err)
            log.exception("could not hand back command command_id=%s", job.command.command_id)
        self.set_visibility(job.receipt, visibility_seconds, job.message_id)

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
