"""The consumer's receive loop: long-polls SQS (up to 10 messages a receive) while fewer than ``max_in_flight``
commands are in flight, whatever the number of drains evicting, hands each to a ``CommandWorker`` on its own thread
(which cordons a drain's node at once, then waits until the commands received so far are cordoned too and for a
drain slot), and on shutdown hands back what did not finish in time."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from adapters.aws.ports import CommandReceiver
from adapters.dynamo.store import Store
from agent.cloudwatch import CloudWatchPublisher
from agent.consumer.config import ConsumerConfig
from agent.consumer.heartbeat import Heartbeat
from agent.consumer.jobs import Counters
from agent.consumer.steps import Engine
from agent.consumer.worker import CommandWorker
from agent.health import SQS, Health
from agent.hooks import HookFinisher
from agent.metrics import AgentMetrics
from agent.report import Reporter
from core.exceptions import RetryableError
from core.model import utcnow

log = logging.getLogger(__name__)

MAX_MESSAGES_PER_RECEIVE = 10  # ReceiveMessage's MaxNumberOfMessages limit (SQS API reference)


def receive_backoff_seconds(failures: int) -> float:
    """Seconds the loop waits after its ``failures``-th receive error in a row: 1 s doubling to at most 30 s. Pure.

    >>> [receive_backoff_seconds(n) for n in (1, 2, 5, 6, 9)]
    [1.0, 2.0, 16.0, 30.0, 30.0]
    """
    return min(30.0, 0.5 * 2.0 ** min(failures, 6))


def log_receive_failure(err: Exception, delay: float, failures: int) -> None:
    """Log a failed ReceiveMessage: a transient refusal (``RetryableError``: throttling, a 5xx, a timeout; retried
    after ``delay`` seconds) as a warning with its message, anything else with its traceback. Under a throttling
    burst the loop backs off and fails often; a traceback each time says nothing the message does not."""
    if isinstance(err, RetryableError):
        log.warning("receive failed, backing off seconds=%.1f consecutive_failures=%d: %s", delay, failures, err)
    else:
        log.error("receive failed, backing off seconds=%.1f consecutive_failures=%d", delay, failures, exc_info=err)


class CommandConsumer:
    """Runs commands from the queue (see ``agent.consumer``).

    Args:
        queue: the command queue (``adapters.aws.sqs.CommandQueue``).
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
        queue: CommandReceiver,
        store: Store,
        engine: Engine,
        reporter: Reporter,
        config: ConsumerConfig,
        clock: Callable[[], datetime] = utcnow,
        *,
        metrics: AgentMetrics | None = None,
        health: Health | None = None,
        hooks: HookFinisher | None = None,
        alarms: CloudWatchPublisher | None = None,
    ) -> None:
        self.metrics = metrics
        self.health = health
        self.queue = queue
        self.config = config
        self.worker = CommandWorker(
            queue, store, engine, reporter, config, clock, metrics=metrics, hooks=hooks, alarms=alarms
        )
        tighten = getattr(engine, "tighten", None)  # DrainEngine.tighten; a stand-in engine may have none
        self.heartbeat = Heartbeat(
            queue,
            store,
            config,
            clock,
            self.worker.jobs.list,
            hooks,
            metrics=metrics,
            tighten=tighten,
            tighten_waiting=self.worker.tighten_waiting,
        )
        self._busy = 0
        self._slots = threading.Condition()

    @property
    def counters(self) -> Counters:
        """What happened to the messages so far (``received``, ``malformed``, ``succeeded``, ...)."""
        return self.worker.counters

    def handle(self, message: Mapping[str, Any]) -> None:
        """Take one received message to its end (``CommandWorker.handle``)."""
        self.worker.handle(message)

    def heartbeat_once(self) -> None:
        """One beat of the heartbeat thread (``Heartbeat.beat_once``)."""
        self.heartbeat.beat_once()

    def run(self, stop: threading.Event) -> None:
        """Poll until ``stop`` is set (returns within ``wait_seconds`` of it). Never raises."""
        self.heartbeat.start()
        failures = 0
        log.info(
            "consumer polling queue=%s worker=%s concurrency=%d max_in_flight=%d",
            self.config.queue_url,
            self.config.worker_id,
            self.config.concurrency,
            self.config.max_in_flight,
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
            except Exception as err:  # noqa: BLE001 - the loop survives every receive error; logged with its kind
                failures += 1
                if self.metrics is not None:
                    self.metrics.sqs_poll_errors.inc()
                    self.metrics.loop_error("consumer", err)
                delay = receive_backoff_seconds(failures)
                log_receive_failure(err, delay, failures)
                stop.wait(delay)
                continue
            holds = [self.worker.cordons.hold() for _ in messages]  # before any of them evicts (a wave)
            for message, cordoned in zip(messages, holds, strict=True):
                if stop.is_set():
                    cordoned()
                    self.worker.set_visibility(message["ReceiptHandle"], 0, message.get("MessageId", "?"))
                    continue
                self._spawn(message, cordoned)
        log.info("consumer stopped polling")

    def shutdown(self, grace_seconds: float | None = None) -> None:
        """After ``run`` returned: wait up to ``grace_seconds`` for in-flight commands, hand back the rest."""
        grace = self.config.shutdown_grace_seconds if grace_seconds is None else grace_seconds
        deadline = time.monotonic() + grace
        with self._slots:
            while self._busy and (left := deadline - time.monotonic()) > 0:
                self._slots.wait(left)
        for job in self.worker.jobs.list():
            if job.close():
                job.handed_back = True
                log.warning(
                    "shutdown: handing back command command_id=%s attempt=%d", job.command.command_id, job.attempt
                )
                self.worker.give_back(job, visibility_seconds=0)
                self.counters.inc("handed_back")
        self.heartbeat.stop()
        if self.health is not None:
            self.health.retire("consumer")
        log.info("consumer shut down counts=%s", self.counters.snapshot())

    def _receive(self, free: int) -> list[dict[str, Any]]:
        return self.queue.receive(
            min(MAX_MESSAGES_PER_RECEIVE, free), self.config.wait_seconds, self.config.visibility_timeout_seconds
        )

    def _wait_for_free_slot(self, stop: threading.Event) -> int:
        with self._slots:
            if self._busy >= self.config.max_in_flight:
                self._slots.wait(1.0)
            return 0 if stop.is_set() else max(0, self.config.max_in_flight - self._busy)

    def _spawn(self, message: dict[str, Any], cordoned: Callable[[], None]) -> None:
        with self._slots:
            self._busy += 1
        name = f"command-{message.get('MessageId', '?')[:8]}"
        threading.Thread(target=self._work, args=(message, cordoned), name=name, daemon=True).start()

    def _work(self, message: dict[str, Any], cordoned: Callable[[], None]) -> None:
        try:
            self.worker.handle(message, cordoned)
        except Exception as err:
            log.exception("unexpected error handling message_id=%s", message.get("MessageId"))
            self.counters.inc("errors")
            if self.metrics is not None:
                self.metrics.loop_error("consumer", err)
        finally:
            cordoned()  # whatever became of the message, it holds no drain up any more
            with self._slots:
                self._busy -= 1
                self._slots.notify_all()
