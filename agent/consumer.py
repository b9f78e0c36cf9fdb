"""The command consumer: long-polls SQS and runs each command once, whatever SQS delivers.

SQS delivers at least once, so the ``CMD#<id>`` item decides (``core.store.Store``):

1. ``parse_message`` (pure) sorts each message: a command for this cluster, one for another cluster (deleted,
   logged, counted), or garbage (logged with its id and a preview, counted, made visible again at once so the
   queue's RedrivePolicy moves it to the dead-letter queue after ``maxReceiveCount`` receives).
2. ``Store.start_command`` moves the item ``queued`` → ``running`` (or takes over a ``running`` item whose heartbeat
   is older than ``STALE_RUNNING_SECONDS``: its worker died; ``attempt`` + 1). When it refuses, ``on_refusal``
   (pure) says what the message gets: deleted (a duplicate of a finished command), its notifications re-sent and
   deleted (finished by a worker that died before notifying), or left for later (another live worker runs it; it
   becomes visible again about when that worker's heartbeat would go stale).
3. The engine runs it (``DrainEngine.run``) while a heartbeat thread extends the message's visibility and the
   item's ``heartbeat_at`` every third of the visibility timeout.
4. ``Reporter.report`` writes the terminal status, then notifies; the message is deleted once EventBridge took
   the event. When it did not, the message is left: it comes back after the visibility timeout and the
   notification is sent again (``on_refusal`` → NOTIFY_AGAIN), at most until the RedrivePolicy gives up.

Decisions for the edge cases:

- A drain whose deadline passed before it started is not run: draining with no time left evicts pods for
  nothing. It ends ``timed_out`` with reason "deadline passed before start". Cordon and uncordon still run: each is
  one idempotent write that stays right when late (an uncordon must happen whenever it arrives).
- ``NodeNotFoundError`` (the instance's node never joined, or is gone) ends ``skipped``.
- A ``RetryableError`` from the engine (Kubernetes API down before any work was done) hands the command back:
  the item returns to ``queued`` and the message becomes visible after ``retry_delay_seconds``.
- ``KubernetesRejectedError`` (a 4xx such as 403: the agent's ClusterRole lacks a verb) and any other exception
  from the engine end ``failed`` with the error in the result: retrying them would loop.
- Shutdown: polling stops; in-flight commands get ``shutdown_grace_seconds`` to finish; the rest are handed back
  (item ``queued`` again, message visible at once) so another agent takes them without waiting for staleness.
- Lifecycle hooks (``agent.hooks``): while a drain runs, its instance's pending termination lifecycle action gets
  a heartbeat every ``lifecycle_heartbeat_seconds`` until the drain's deadline; when a drain ends (any terminal
  status, and again for a duplicate delivery of a finished drain), the action is completed with CONTINUE before
  the message is deleted.

Observability: every log line written while a message's command is handled carries its ``command_id``,
``instance_id`` and ``node`` (``agent.logs.command_context``); counts go to ``agent.metrics.AgentMetrics``, drain
failures to CloudWatch (``agent.cloudwatch``), and the poll loop's ticks and successful receives to
``agent.health.Health`` (liveness and readiness probes).

Threads: one poll loop (``run``), one worker thread per in-flight command (at most ``concurrency``), one
heartbeat thread. The boto3 clients are shared (they are thread-safe); the ``Store``'s Table resource is used for
plain item calls only, which hold no per-resource state.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any, Protocol

from pydantic import ValidationError

from agent.cloudwatch import CloudWatchPublisher
from agent.health import SQS, Health
from agent.hooks import LifecycleHooks
from agent.logs import command_context
from agent.metrics import AgentMetrics
from agent.report import Outcome, Reporter
from core.exceptions import (
    CommandTransitionError,
    KubernetesRejectedError,
    NodeNotFoundError,
    RetryableError,
    StoreUnavailableError,
)
from core.model import Command, CommandKind, CommandStatus, utcnow
from core.settings import AgentSettings
from core.store import Store

log = logging.getLogger(__name__)

MAX_MESSAGES_PER_RECEIVE = 10  # ReceiveMessage's MaxNumberOfMessages limit (SQS API reference)
PREVIEW_CHARS = 160
DEADLINE_PASSED = "deadline passed before start"


class Engine(Protocol):
    """What the consumer needs of ``agent.drain.engine.DrainEngine``."""

    def run(self, command: Command) -> Any:
        """Execute ``command``; returns a ``DrainResult`` (``.status``: terminal ``CommandStatus``,
        ``.event_posted``, ``.model_dump(mode="json")``). Raises ``NodeNotFoundError``, ``RetryableError``,
        ``KubernetesRejectedError``."""
        ...


@dataclass(frozen=True)
class ConsumerConfig:
    """The consumer's knobs (from ``AgentSettings``; seconds unless named otherwise).

    Attributes:
        cluster: this agent's cluster; commands for another are dropped.
        queue_url: the command queue.
        worker_id: this process's identity in ``CMD#`` items (``<hostname>:<pid>``).
        concurrency: commands run at once (worker threads).
        wait_seconds: ReceiveMessage WaitTimeSeconds (long poll, 0..20).
        visibility_timeout_seconds: ReceiveMessage VisibilityTimeout, re-extended by the heartbeat.
        stale_running_seconds: a ``running`` item whose heartbeat is older is taken over.
        command_ttl_seconds: TTL of a ``CMD#`` item created by this agent (a command with no record).
        shutdown_grace_seconds: how long shutdown waits for in-flight commands before handing them back.
        retry_delay_seconds: visibility delay of a command handed back after a retryable error.
        lifecycle_heartbeat_seconds: period of RecordLifecycleActionHeartbeat while a drain runs.
    """

    cluster: str
    queue_url: str
    worker_id: str
    concurrency: int = 4
    wait_seconds: int = 10
    visibility_timeout_seconds: int = 30
    stale_running_seconds: int = 60
    command_ttl_seconds: int = 7 * 86400
    shutdown_grace_seconds: float = 20.0
    retry_delay_seconds: int = 5
    lifecycle_heartbeat_seconds: float = 60.0

    @classmethod
    def from_settings(cls, settings: AgentSettings, worker_id: str) -> ConsumerConfig:
        return cls(
            cluster=settings.cluster_name,
            queue_url=settings.queue_url,
            worker_id=worker_id,
            concurrency=settings.concurrency,
            wait_seconds=settings.poll_wait_seconds,
            visibility_timeout_seconds=settings.visibility_timeout_seconds,
            stale_running_seconds=settings.stale_running_seconds,
            command_ttl_seconds=settings.command_ttl_seconds,
            shutdown_grace_seconds=settings.shutdown_grace_seconds,
            lifecycle_heartbeat_seconds=settings.lifecycle_heartbeat_seconds,
        )

    @property
    def heartbeat_seconds(self) -> float:
        return max(1.0, self.visibility_timeout_seconds / 3)


# -- pure decisions --------------------------------------------------------------------------------------------


class Verdict(str, Enum):
    RUN = "run"
    FOREIGN = "foreign"
    MALFORMED = "malformed"


@dataclass(frozen=True)
class Parsed:
    """What a message body is: ``command`` is set for RUN and FOREIGN; ``why`` explains the others."""

    verdict: Verdict
    command: Command | None = None
    why: str = ""


def parse_message(body: str, cluster: str) -> Parsed:
    """Sort an SQS message body (``Command.model_dump_json()`` as the Lambdas send it). Pure.

    >>> parse_message("not json", "demo").verdict
    <Verdict.MALFORMED: 'malformed'>
    """
    try:
        command = Command.model_validate_json(body)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        return Parsed(Verdict.MALFORMED, why=f"{where}: {first['msg']}")
    if command.cluster != cluster:
        return Parsed(Verdict.FOREIGN, command, f"for cluster {command.cluster!r}, this agent serves {cluster!r}")
    return Parsed(Verdict.RUN, command)


def deadline_passed(command: Command, now: datetime) -> bool:
    """True for a drain whose deadline is over (it is not started; see the module docstring). Pure."""
    return command.kind is CommandKind.DRAIN and command.seconds_left(now) <= 0


class Disposition(str, Enum):
    DUPLICATE = "duplicate"  # finished and notified: delete the message
    NOTIFY_AGAIN = "notify_again"  # finished, never notified, its worker surely gone: notify, then delete
    LATER = "later"  # someone else is at it: leave the message, visible again after a delay


def on_refusal(
    current: Mapping[str, Any] | None, now: float, stale_running_seconds: float, visibility_timeout_seconds: int
) -> tuple[Disposition, int]:
    """What to do with a message whose command ``Store.start_command`` refused. Pure.

    Args:
        current: the ``CMD#`` item as the refusal returned it.
        now: epoch seconds.

    Returns:
        (disposition, delay): for LATER, the seconds until the message should be visible again (1 ..
        visibility timeout): for a command running elsewhere, about when its heartbeat goes stale; for a command
        finished moments ago but not notified yet, when its worker should have notified.
    """
    if current is None:
        return Disposition.LATER, 1
    status = CommandStatus(current.get("status", CommandStatus.QUEUED.value))
    if status.terminal:
        if current.get("reported_at"):
            return Disposition.DUPLICATE, 0
        finished = _epoch(current.get("finished_at"))
        age = now - finished if finished is not None else math.inf
        if age >= visibility_timeout_seconds:
            return Disposition.NOTIFY_AGAIN, 0
        return Disposition.LATER, _clamp(visibility_timeout_seconds - age + 1, visibility_timeout_seconds)
    if status is CommandStatus.RUNNING:
        heartbeat = float(current.get("heartbeat_at", 0))
        return Disposition.LATER, _clamp(heartbeat + stale_running_seconds - now + 1, visibility_timeout_seconds)
    return Disposition.LATER, 1  # queued: lost a race with another starter; look again soon


def own_result(
    command: Command, status: CommandStatus, message: str, errors: list[str] | None = None
) -> dict[str, Any]:
    """A result decided without the engine, in the shape of ``DrainResult``'s JSON (fields it can fill). Pure."""
    return {
        "command_id": command.command_id,
        "kind": command.kind.value,
        "instance_id": command.instance_id,
        "node_name": command.node_name or "",
        "status": status.value,
        "message": message,
        "pods": [],
        "remaining": [],
        "errors": errors or [],
    }


def _clamp(seconds: float, upper: int) -> int:
    return int(min(max(math.ceil(seconds), 1), upper))


def _epoch(iso: Any) -> float | None:
    if not iso:
        return None
    try:
        return datetime.fromisoformat(str(iso)).timestamp()
    except ValueError:
        return None


# -- the loop --------------------------------------------------------------------------------------------------


@dataclass
class Job:
    """A command this worker started (``attempt``) from one SQS message (``receipt`` handle)."""

    message_id: str
    receipt: str
    command: Command
    attempt: int
    handed_back: bool = False
    lost: bool = False  # another worker took the command over (seen by the heartbeat)
    lifecycle_beat_at: float = field(default_factory=time.monotonic)  # last lifecycle heartbeat (or the start)
    _closed: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def close(self) -> bool:
        """Claim the job's end (finish it, or hand it back); only the first caller gets True."""
        with self._lock:
            if self._closed:
                return False
            self._closed = True
            return True


class Counters:
    """Thread-safe event counts (``received``, ``malformed``, ``foreign``, ``duplicate``, ``succeeded`` ...)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def inc(self, name: str) -> None:
        with self._lock:
            self._counts[name] += 1

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)


class CommandConsumer:
    """Runs commands from the queue (see the module docstring).

    Args:
        sqs: a boto3 ``sqs`` client.
        store: the cluster's table access.
        engine: runs a command (``DrainEngine``).
        reporter: writes the terminal status and notifies.
        config: knobs.
        clock: returns the current UTC time (injectable for tests).
        metrics: Prometheus counts (optional).
        health: the probes' facts (optional): the ``consumer`` loop's ticks, SQS reached.
        hooks: lifecycle-hook heartbeats and completion (optional).
        alarms: CloudWatch metrics for the stack's alarms (optional).
    """

    def __init__(
        self,
        sqs: Any,
        store: Store,
        engine: Engine,
        reporter: Reporter,
        config: ConsumerConfig,
        clock: Callable[[], datetime] = utcnow,
        *,
        metrics: AgentMetrics | None = None,
        health: Health | None = None,
        hooks: LifecycleHooks | None = None,
        alarms: CloudWatchPublisher | None = None,
    ) -> None:
        self.metrics = metrics
        self.health = health
        self.hooks = hooks
        self.alarms = alarms
        self.sqs = sqs
        self.store = store
        self.engine = engine
        self.reporter = reporter
        self.config = config
        self.clock = clock
        self.counters = Counters()
        self._busy = 0
        self._slots = threading.Condition()
        self._jobs: dict[str, Job] = {}
        self._jobs_lock = threading.Lock()
        self._heartbeat_stop = threading.Event()
        self._heartbeat_thread: threading.Thread | None = None

    # -- poll loop ---------------------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Poll until ``stop`` is set (returns within ``wait_seconds`` of it). Never raises."""
        self._start_heartbeat()
        failures = 0
        log.info(
            "consumer polling queue=%s worker=%s concurrency=%d",
            self.config.queue_url,
            self.config.worker_id,
            self.config.concurrency,
        )
        while not stop.is_set():
            if self.health is not None:
                self.health.beat("consumer")
            free = self._wait_for_free_slot(stop)
            if free == 0:
                continue
            try:
                messages = self._receive(free)
                failures = 0
                if self.health is not None:
                    self.health.reached(SQS)
            except Exception:
                failures += 1
                if self.metrics is not None:
                    self.metrics.sqs_poll_errors.inc()
                delay = min(30.0, 0.5 * 2 ** min(failures, 6))
                log.exception("receive failed, backing off seconds=%.1f consecutive_failures=%d", delay, failures)
                stop.wait(delay)
                continue
            for message in messages:
                if stop.is_set():
                    self._set_visibility(message["ReceiptHandle"], 0, message.get("MessageId", "?"))
                    continue
                self._spawn(message)
        log.info("consumer stopped polling")

    def shutdown(self, grace_seconds: float | None = None) -> None:
        """After ``run`` returned: wait up to ``grace_seconds`` for in-flight commands, hand back the rest."""
        grace = self.config.shutdown_grace_seconds if grace_seconds is None else grace_seconds
        deadline = time.monotonic() + grace
        with self._slots:
            while self._busy and (left := deadline - time.monotonic()) > 0:
                self._slots.wait(left)
        for job in self._job_list():
            if job.close():
                job.handed_back = True
                log.warning(
                    "shutdown: handing back command command_id=%s attempt=%d", job.command.command_id, job.attempt
                )
                self._give_back(job, visibility_seconds=0)
                self.counters.inc("handed_back")
        self._heartbeat_stop.set()
        if self.health is not None:
            self.health.retire("consumer")
        log.info("consumer shut down counts=%s", self.counters.snapshot())

    def _receive(self, free: int) -> list[dict[str, Any]]:
        out = self.sqs.receive_message(
            QueueUrl=self.config.queue_url,
            MaxNumberOfMessages=min(MAX_MESSAGES_PER_RECEIVE, free),
            WaitTimeSeconds=self.config.wait_seconds,
            VisibilityTimeout=self.config.visibility_timeout_seconds,
            MessageSystemAttributeNames=["ApproximateReceiveCount"],
        )
        messages: list[dict[str, Any]] = out.get("Messages", [])
        return messages

    def _wait_for_free_slot(self, stop: threading.Event) -> int:
        with self._slots:
            if self._busy >= self.config.concurrency:
                self._slots.wait(1.0)
            return 0 if stop.is_set() else max(0, self.config.concurrency - self._busy)

    def _spawn(self, message: dict[str, Any]) -> None:
        with self._slots:
            self._busy += 1
        name = f"command-{message.get('MessageId', '?')[:8]}"
        threading.Thread(target=self._work, args=(message,), name=name, daemon=True).start()

    def _work(self, message: dict[str, Any]) -> None:
        try:
            self.handle(message)
        except Exception:
            log.exception("unexpected error handling message_id=%s", message.get("MessageId"))
            self.counters.inc("errors")
        finally:
            with self._slots:
                self._busy -= 1
                self._slots.notify_all()

    # -- one message -------------------------------------------------------------------------------------------

    def handle(self, message: Mapping[str, Any]) -> None:
        """Take one received message to its end (see the module docstring). Runs in a worker thread.

        Raises:
            StoreUnavailableError, botocore errors: from ``start_command``; the message is left and comes back.
        """
        message_id = str(message.get("MessageId", "?"))
        receipt = str(message["ReceiptHandle"])
        body = str(message.get("Body", ""))
        self.counters.inc("received")
        parsed = parse_message(body, self.config.cluster)
        if parsed.verdict is Verdict.MALFORMED:
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
            self._set_visibility(receipt, 0, message_id)
            return
        command = parsed.command
        assert command is not None
        if parsed.verdict is Verdict.FOREIGN:
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
            self._start(message_id, receipt, command)

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
        with self._jobs_lock:
            self._jobs[command.command_id] = job
        try:
            self._run_job(job)
        finally:
            with self._jobs_lock:
                if self._jobs.get(command.command_id) is job:
                    del self._jobs[command.command_id]

    def _run_job(self, job: Job) -> None:
        command = job.command
        try:
            outcome = self._execute(command)
        except RetryableError as err:
            if job.close():
                log.warning(
                    "retryable error, command handed back command_id=%s delay=%ds error=%s",
                    command.command_id,
                    self.config.retry_delay_seconds,
                    err,
                )
                self.counters.inc("retried")
                self._give_back(job, visibility_seconds=self.config.retry_delay_seconds)
            return
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
        except StoreUnavailableError:
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

    def _execute(self, command: Command) -> Outcome:
        """Run the command through the engine, or decide its end without it. Raises ``RetryableError``."""
        if deadline_passed(command, self.clock()):
            log.warning(
                "drain deadline passed before start command_id=%s deadline=%s",
                command.command_id,
                command.deadline.isoformat(),
            )
            return Outcome(
                CommandStatus.TIMED_OUT,
                own_result(command, CommandStatus.TIMED_OUT, DEADLINE_PASSED),
                engine_posted_event=False,
            )
        try:
            result = self.engine.run(command)
        except NodeNotFoundError as err:
            log.info(
                "no node for the instance, command skipped command_id=%s instance_id=%s",
                command.command_id,
                command.instance_id,
            )
            return Outcome(
                CommandStatus.SKIPPED, own_result(command, CommandStatus.SKIPPED, str(err)), engine_posted_event=True
            )  # no node, so no Event to post
        except RetryableError:
            raise
        except KubernetesRejectedError as err:
            log.error(
                "Kubernetes API refused a request, command failed command_id=%s status=%s error=%s",
                command.command_id,
                err.status,
                err,
            )
            return Outcome(
                CommandStatus.FAILED,
                own_result(command, CommandStatus.FAILED, f"Kubernetes API refused: {err}", [str(err)]),
                engine_posted_event=False,
            )
        except Exception as err:
            log.exception("engine error command_id=%s", command.command_id)
            text = f"{type(err).__name__}: {err}"
            return Outcome(
                CommandStatus.FAILED,
                own_result(command, CommandStatus.FAILED, f"engine error: {text}", [text]),
                engine_posted_event=False,
            )
        status = CommandStatus(result.status)
        dumped: dict[str, Any] = result.model_dump(mode="json")
        if not status.terminal:
            text = f"engine returned non-terminal status {status.value}"
            return Outcome(
                CommandStatus.FAILED,
                {**dumped, "status": CommandStatus.FAILED.value, "errors": [*dumped.get("errors", []), text]},
                engine_posted_event=False,
            )
        return Outcome(status, dumped, engine_posted_event=bool(getattr(result, "event_posted", False)))

    def _refused(self, message_id: str, receipt: str, command: Command, current: Mapping[str, Any] | None) -> None:
        disposition, delay = on_refusal(
            current, self.clock().timestamp(), self.config.stale_running_seconds, self.config.visibility_timeout_seconds
        )
        item = current or {}
        if disposition is Disposition.DUPLICATE:
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
        elif disposition is Disposition.NOTIFY_AGAIN:
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
            self._set_visibility(receipt, delay, message_id)

    # -- heartbeat, hand back ----------------------------------------------------------------------------------

    def _start_heartbeat(self) -> None:
        if self._heartbeat_thread is None:
            self._heartbeat_thread = threading.Thread(target=self._heartbeat_loop, name="heartbeat", daemon=True)
            self._heartbeat_thread.start()

    def _heartbeat_loop(self) -> None:
        while not self._heartbeat_stop.wait(self.config.heartbeat_seconds):
            self.heartbeat_once()

    def heartbeat_once(self) -> None:
        """Extend each in-flight message's visibility and its ``CMD#`` heartbeat; flag jobs taken over as lost;
        record lifecycle-hook heartbeats for drains that are due one.

        Called every ``heartbeat_seconds`` by the heartbeat thread. Never raises.
        """
        for job in self._job_list():
            with command_context(
                command_id=job.command.command_id, instance_id=job.command.instance_id, node=job.command.node_name
            ):
                try:
                    self._beat(job)
                    self._lifecycle_beat(job)
                except Exception:
                    log.exception("heartbeat failed command_id=%s", job.command.command_id)

    def _lifecycle_beat(self, job: Job) -> None:
        """RecordLifecycleActionHeartbeat for a drain whose instance has a pending action, every
        ``lifecycle_heartbeat_seconds``, until the drain's deadline (the cap)."""
        if self.hooks is None or job.command.kind is not CommandKind.DRAIN or job.handed_back or job.lost:
            return
        if time.monotonic() - job.lifecycle_beat_at < self.config.lifecycle_heartbeat_seconds:
            return
        if job.command.seconds_left(self.clock()) <= 0:
            return  # past the cap: the action ends by the drain's end or the hook's own timeout
        job.lifecycle_beat_at = time.monotonic()
        self.hooks.heartbeat(job.command.instance_id)

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

    def _dropped(self, reason: str) -> None:
        if self.metrics is not None:
            self.metrics.messages_dropped.labels(reason=reason).inc()

    def _beat(self, job: Job) -> None:
        if job.handed_back or job.lost:
            return
        self.sqs.change_message_visibility(
            QueueUrl=self.config.queue_url,
            ReceiptHandle=job.receipt,
            VisibilityTimeout=self.config.visibility_timeout_seconds,
        )
        try:
            self.store.heartbeat_command(job.command.command_id, self.config.worker_id, job.attempt, now=self.clock())
        except CommandTransitionError as err:
            job.lost = True
            current = err.current or {}
            log.warning(
                "command taken over by another worker command_id=%s attempt=%d now=%s/attempt %s",
                job.command.command_id,
                job.attempt,
                current.get("worker"),
                current.get("attempt"),
            )

    def _give_back(self, job: Job, visibility_seconds: int) -> None:
        """Return a started command to ``queued`` (so anyone may start it at once) and make its message visible."""
        now = self.clock()
        try:
            self.store.release_command(job.command.command_id, self.config.worker_id, job.attempt, now=now)
        except Exception:
            log.exception("could not hand back command command_id=%s", job.command.command_id)
        self._set_visibility(job.receipt, visibility_seconds, job.message_id)

    def _job_list(self) -> list[Job]:
        with self._jobs_lock:
            return list(self._jobs.values())

    # -- SQS effects -------------------------------------------------------------------------------------------

    def _delete(self, receipt: str, message_id: str) -> None:
        try:
            self.sqs.delete_message(QueueUrl=self.config.queue_url, ReceiptHandle=receipt)
        except Exception:
            log.exception("delete_message failed message_id=%s", message_id)

    def _set_visibility(self, receipt: str, seconds: int, message_id: str) -> None:
        try:
            self.sqs.change_message_visibility(
                QueueUrl=self.config.queue_url, ReceiptHandle=receipt, VisibilityTimeout=seconds
            )
        except Exception:
            log.exception("change_message_visibility failed message_id=%s seconds=%d", message_id, seconds)
