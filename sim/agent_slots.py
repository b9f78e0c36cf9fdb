"""The simulated agent's drains between its worker's fast step and their end (``sim.agent.SimAgent`` mixes this in):
where the product's worker blocks a thread, these are kernel actions.

- A cordoned drain waits for one of ``concurrency`` slots, earliest deadline first (``schedule.DeadlineGate``'s
  rule); one whose instance ends at a deadline within ``DRAIN_URGENT_SECONDS`` starts at once, over the slots
  (``schedule.urgent_drain``: the gate polls it as its waiters wait, so a drain that becomes urgent later is looked
  at again then), and runs as a ``sim.agent_drain.SimDrain``; its end goes back to the worker (``end_drain``).
- A drain that met a retryable error runs again after its backoff (``back_off``), and a drain waiting for its
  instance's node probes again the same way (``SimWorker._cordon_first``, ``steps.NodeWait``), its job heartbeated
  meanwhile; an error of such a kernel action is logged and counted as ``SimAgent.handle`` counts one, never raised
  out of the simulation.
- A tightened deadline reaches a waiting drain's job (``_tighten_waiting``, as ``CommandWorker.tighten_waiting``)
  and a running one's ``SimDrain`` (``_tighten``).
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any

from agent.consumer.config import ConsumerConfig
from agent.consumer.decisions import capped
from agent.consumer.jobs import Job
from agent.consumer.schedule import urgent_drain
from agent.drain.engine import DrainEngine
from agent.drain.results import NodeCommandResult
from sim.agent_drain import SimDrain
from sim.agent_worker import ResultEngine, SimWorker
from sim.kernel import Kernel
from sim.kube import SimKube

log = logging.getLogger(__name__)


class DrainSlots:
    """The drain slots and waits of one ``SimAgent`` (module docstring); the attributes are the agent's."""

    kernel: Kernel
    kube: SimKube
    engine: DrainEngine
    results: ResultEngine
    worker: SimWorker
    config: ConsumerConfig
    name: str
    alive: bool
    leading: bool
    waiting: list[tuple[datetime, int, Job]]
    running: dict[str, tuple[Job, SimDrain, datetime]]
    backing_off: dict[str, Job]
    _seq: Iterator[int]
    _rand: Callable[[], float]

    def _count(self, name: str) -> None:
        raise NotImplementedError

    def _guarded(self, work: Callable[[], None], message_id: str = "") -> None:
        raise NotImplementedError

    def back_off(self, job: Job, delay: float, then: Callable[[Job], None] | None = None) -> None:
        """A drain that met a retryable error runs again after ``delay`` (``then``: goes on with it so instead), its
        job still heartbeated meanwhile."""
        self.backing_off[job.command.command_id] = job

        def again() -> None:
            if self.backing_off.get(job.command.command_id) is job:
                del self.backing_off[job.command.command_id]
                if self.alive and not (job.closed or job.lost):
                    self._guarded(lambda: (then or self.enqueue)(job))
                if self.alive:
                    self._pump()  # its place in the bound is free unless it went on waiting (a receive when full)

        self.kernel.after(delay, f"agent:{self.name}:drain-retry", again)

    def enqueue(self, job: Job) -> None:
        """A cordoned drain waits for a slot, earliest deadline first; one whose instance ends at a deadline within
        ``urgent_seconds`` starts at once, over the slots (``schedule.urgent_drain``, as ``DeadlineGate`` admits
        it), and one that will be within it later is looked at again then."""
        self._wait(job, next(self._seq))

    def _wait(self, job: Job, seq: int) -> None:
        heapq.heappush(self.waiting, (job.command.deadline, seq, job))
        self._pump()
        delay = (job.command.deadline - self.kernel.now()).total_seconds() - self.config.urgent_seconds
        if job.ends and self.config.urgent_seconds > 0 and delay > 0:  # the gate polls ``urgent`` as it waits
            self.kernel.after(delay, f"agent:{self.name}:urgent", self._pump)

    def _pump(self) -> None:
        now, within = self.kernel.now(), self.config.urgent_seconds
        urgent = sorted(e for e in self.waiting if urgent_drain(e[2].ends, e[2].command.deadline, now, within))
        if urgent and self.alive and self.leading:  # the gate's waiters polling ``urgent``: in, whatever is held
            self.waiting = [e for e in self.waiting if e not in urgent]
            heapq.heapify(self.waiting)
            for _, _, job in urgent:
                if len(self.running) >= self.config.concurrency:
                    self._count("urgent_over_bound")
                self._run(job)
        while self.alive and self.leading and self.waiting and len(self.running) < self.config.concurrency:
            self._run(heapq.heappop(self.waiting)[2])

    def _run(self, job: Job) -> None:
        if job.closed or job.lost:
            return
        started = self.kernel.now()
        command = capped(job.command, started, self.config.max_command_seconds)
        drain = SimDrain(self.kernel, self.kube, self.engine, command, self._rand, self._drain_ended, self._cp_busy)
        self.running[job.command.command_id] = (job, drain, started)
        drain.start()

    def _cp_busy(self) -> int:
        return sum(1 for _, drain, _ in self.running.values() if drain.control_plane and not drain.ended)

    def _drain_ended(self, drain: SimDrain, end: NodeCommandResult | Exception) -> None:
        entry = self.running.pop(drain.command.command_id, None)
        if entry is None:
            return
        job, _, started = entry
        self.results.ends[job.command.command_id] = end
        self.worker.end_drain(job, started)
        self._pump()

    def _jobs(self) -> list[Job]:
        """Every job in flight (the heartbeat's, every ``heartbeat_seconds``): the worker's (a command in its fast
        step), then those running, waiting for a slot or backing off; most beats find the last three empty, and take
        the worker's list alone."""
        if not (self.running or self.waiting or self.backing_off):
            return self.worker.jobs.list()
        return [
            *self.worker.jobs.list(),
            *(job for job, _, _ in self.running.values()),
            *(j for _, _, j in self.waiting),
            *self.backing_off.values(),
        ]

    def _tighten(self, command_id: str, when: datetime) -> bool:
        entry = self.running.get(command_id)
        return entry is not None and entry[1].tighten(when)

    def _tighten_waiting(self, job: Job, item: Mapping[str, Any] | None) -> bool:
        """A drain waiting for its node or for a slot here takes its tightened deadline (``Job.tighten``), as
        ``CommandWorker.tighten_waiting`` does; its place among the waiting moves with it (``DeadlineGate``)."""
        if job.command.command_id in self.worker.node_waits:  # its wait ends by the new deadline (``NodeWait.left``)
            return job.tighten(item) is not None
        entry = next((e for e in self.waiting if e[2] is job), None)
        if entry is None or job.tighten(item) is None:
            return False
        self.waiting = [e for e in self.waiting if e is not entry]
        self._wait(job, entry[1])  # its arrival kept for ties; urgent at once, or looked at again when it will be
        return True
