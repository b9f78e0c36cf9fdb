"""The consumer's heartbeat thread: keeps in-flight commands owned while they run.

Every ``heartbeat_seconds`` (a third of the visibility timeout) each in-flight message's visibility is extended
and its ``CMD#`` item's ``heartbeat_at`` renewed, the second even when the first fails: the item proves the worker
alive, and a message that comes back meanwhile is adopted by its job (``answers.WorkerBase._adopt``); a job another
worker took over is flagged ``lost``; the item as updated is read back, and a deadline tightened in it
(``deadline_tightened_to``: a Spot warning for a node a rebalance drain empties) is passed to the running drain
(``tighten``, ``DrainEngine.tighten``), or to the job of a drain still waiting for a slot (``tighten_waiting``: it
then starts tightened, ahead of the later deadlines); a drain whose instance has a pending termination lifecycle
action gets RecordLifecycleActionHeartbeat every ``lifecycle_heartbeat_seconds`` until the drain's deadline.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from adapters.aws.ports import CommandReceiver
from adapters.dynamo.store import Store
from agent.consumer.config import ConsumerConfig
from agent.consumer.decisions import tightened_deadline
from agent.consumer.jobs import Job
from agent.hooks import HookFinisher
from agent.logs import command_context
from agent.metrics import AgentMetrics
from core.exceptions import CommandTransitionError
from core.model import CommandKind

log = logging.getLogger(__name__)


class Heartbeat:
    """The heartbeat thread of one consumer.

    Args:
        queue: the command queue (``adapters.aws.sqs.CommandQueue``).
        store: the cluster's table access.
        config: knobs (queue, worker id, periods).
        clock: returns the current UTC time.
        jobs: returns the in-flight jobs.
        hooks: lifecycle-hook heartbeats (optional).
        metrics: counts the errors a beat survives (``loop_errors{loop="heartbeat"}``; optional).
        tighten: brings a running drain's deadline forward (``DrainEngine.tighten``; optional).
        tighten_waiting: brings forward the deadline of a drain the engine does not run yet (it waits for a slot:
            ``CommandWorker.tighten_waiting``, given the job and its ``CMD#`` item; optional).
        monotonic: the clock of the lifecycle heartbeats' period (seconds; the scale of ``Job.lifecycle_beat_at``).
    """

    def __init__(
        self,
        queue: CommandReceiver,
        store: Store,
        config: ConsumerConfig,
        clock: Callable[[], datetime],
        jobs: Callable[[], list[Job]],
        hooks: HookFinisher | None = None,
        metrics: AgentMetrics | None = None,
        tighten: Callable[[str, datetime], bool] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        tighten_waiting: Callable[[Job, Mapping[str, Any] | None], bool] | None = None,
    ) -> None:
        self.metrics = metrics
        self.queue = queue
        self.store = store
        self.config = config
        self.clock = clock
        self.hooks = hooks
        self.tighten = tighten
        self.tighten_waiting = tighten_waiting
        self.monotonic = monotonic
        self._jobs = jobs
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread (once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="heartbeat", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop the thread after its current beat."""
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self.config.heartbeat_seconds):
            try:
                self.beat_once()
            except Exception as err:  # beat_once catches per job; this keeps the thread alive whatever happens
                if self.metrics is not None:
                    self.metrics.loop_error("heartbeat", err)
                log.exception("heartbeat beat failed")

    def beat_once(self) -> None:
        """Extend each in-flight message's visibility and its ``CMD#`` heartbeat; flag jobs taken over as lost;
        record lifecycle-hook heartbeats for drains that are due one.

        Called every ``heartbeat_seconds`` by the heartbeat thread. Never raises.
        """
        for job in self._jobs():
            with command_context(
                command_id=job.command.command_id, instance_id=job.command.instance_id, node=job.command.node_name
            ):
                try:
                    self._beat(job)
                    self._lifecycle_beat(job)
                except Exception as err:
                    if self.metrics is not None:
                        self.metrics.loop_error("heartbeat", err)
                    log.exception("heartbeat failed command_id=%s", job.command.command_id)

    def _lifecycle_beat(self, job: Job) -> None:
        """RecordLifecycleActionHeartbeat for a drain whose instance has a pending action, every
        ``lifecycle_heartbeat_seconds``, until the drain's deadline (the cap)."""
        if self.hooks is None or job.command.kind is not CommandKind.DRAIN or job.handed_back or job.lost:
            return
        if self.monotonic() - job.lifecycle_beat_at < self.config.lifecycle_heartbeat_seconds:
            return
        if job.command.seconds_left(self.clock()) <= 0:
            return  # past the cap: the action ends by the drain's end or the hook's own timeout
        job.lifecycle_beat_at = self.monotonic()
        self.hooks.heartbeat(job.command.instance_id)

    def _beat(self, job: Job) -> None:
        if job.handed_back or job.lost:
            return
        # whatever SQS answers, the item's heartbeat goes on: a message that comes back meanwhile is adopted
        try:
            self.queue.set_visibility(job.receipt, self.config.visibility_timeout_seconds)
        except Exception as err:  # noqa: BLE001 - any SQS failure is logged and counted, never fatal to the beat
            if self.metrics is not None:
                self.metrics.loop_error("heartbeat", err)
            log.warning(
                "could not extend the message's visibility command_id=%s message_id=%s error=%s",
                job.command.command_id,
                job.message_id,
                err,
            )
        try:
            item = self.store.heartbeat_command(
                job.command.command_id, self.config.worker_id, job.attempt, now=self.clock()
            )
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
            return
        when = tightened_deadline(item)
        # no later than the job's deadline: a drain started already tightened is made deadline-bound here too
        if when is None or when > job.command.deadline:
            return
        if self.tighten is not None and self.tighten(job.command.command_id, when):
            return
        if self.tighten_waiting is not None:  # no drain of it runs yet: it waits for a slot, tightened there
            self.tighten_waiting(job, item)
