"""The simulation's kernel: simulated time, one seeded event queue, named random streams (no threads, no sleeps).

An action is a plain callable run at its simulated instant; actions at the same instant run in the order they were
scheduled (a sequence number breaks ties), so one seed gives one exact run. Every random draw of the simulation
comes from ``Kernel.stream(name)``: a ``random.Random`` seeded from the run's seed and the stream's name (string
seeds hash with SHA-512, stable across processes and Python runs, unlike ``hash()``), so adding draws to one
component does not shift another's.
"""

from __future__ import annotations

import heapq
import random
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from core.clock import use_wall_clock

# The simulated epoch: a Monday, so a weekly schedule starts on a known day.
EPOCH = datetime(2026, 1, 5, tzinfo=UTC)


class SimulatedSleepError(RuntimeError):
    """Product code tried to block on a sleep inside a simulated step; the simulation has no threads, so a wait must
    be a scheduled action instead (the caller's budget or settings are wrong for the simulation)."""


@dataclass
class _Entry:
    at: float
    seq: int
    label: str
    action: Callable[[], None]
    cancelled: bool = False


@dataclass(frozen=True)
class Step:
    """One executed action: its simulated time (seconds since ``EPOCH``) and label."""

    at: float
    label: str


class Timer:
    """A scheduled action that can be cancelled before it runs."""

    def __init__(self, entry: _Entry) -> None:
        self._entry = entry

    def cancel(self) -> None:
        self._entry.cancelled = True

    @property
    def at(self) -> float:
        return self._entry.at


class Kernel:
    """Simulated time and the event queue.

    Args:
        seed: the run's seed (an int); every random stream derives from it.
        epoch: the wall-clock instant of simulated second 0 (aware, UTC).
    """

    def __init__(self, seed: int, epoch: datetime = EPOCH) -> None:
        self.seed = seed
        self.epoch = epoch
        self.t = 0.0  # seconds since epoch
        self._queue: list[tuple[float, int, _Entry]] = []  # (at, seq, entry): compared as tuples, in C
        self._seq = 0
        self._streams: dict[str, random.Random] = {}
        self.steps = 0
        self._now: tuple[datetime, float, datetime] | None = None  # (epoch, t, now()): asked many times a step

    # time -------------------------------------------------------------------------------------------------------
    def now(self) -> datetime:
        """The simulated wall-clock time (aware, UTC); the same (immutable) object again while the time is the same."""
        kept = self._now
        if kept is None or kept[1] != self.t or kept[0] is not self.epoch:
            kept = self._now = (self.epoch, self.t, self.epoch + timedelta(seconds=self.t))
        return kept[2]

    def monotonic(self) -> float:
        """Simulated seconds since the epoch (a monotonic scale)."""
        return self.t

    def sleep(self, seconds: float, stop: threading.Event | None = None) -> bool:
        """``core.clock.Clock.sleep``: never allowed inside a simulated step."""
        raise SimulatedSleepError(f"a sleep of {seconds:.1f} s inside a simulated step at t={self.t:.1f}")

    @contextmanager
    def installed(self) -> Iterator[None]:
        """Within the block every ``core.model.utcnow()`` answers the simulated time."""
        with use_wall_clock(self.now):
            yield

    # randomness -------------------------------------------------------------------------------------------------
    def stream(self, name: str) -> random.Random:
        """The random stream called ``name`` (made on first use from the seed and the name)."""
        rng = self._streams.get(name)
        if rng is None:
            rng = self._streams[name] = random.Random(f"{self.seed}:{name}")
        return rng

    # scheduling -------------------------------------------------------------------------------------------------
    def at(self, when: float, label: str, action: Callable[[], None]) -> Timer:
        """Run ``action`` at simulated second ``when`` (not before now)."""
        entry = _Entry(max(when, self.t), self._seq, label, action)
        self._seq += 1
        heapq.heappush(self._queue, (entry.at, entry.seq, entry))
        return Timer(entry)

    def after(self, delay: float, label: str, action: Callable[[], None]) -> Timer:
        """Run ``action`` ``delay`` seconds from now."""
        return self.at(self.t + max(0.0, delay), label, action)

    def every(
        self, period: float, label: str, action: Callable[[], None], *, first: float | None = None, jitter: float = 0.0
    ) -> None:
        """Run ``action`` every ``period`` seconds (first at ``first``, default one period from now), each time
        shifted by up to ``jitter`` seconds drawn from the stream ``label``."""
        rng = self.stream(f"every:{label}")

        def tick() -> None:
            action()
            self.after(period + (rng.uniform(0, jitter) if jitter else 0.0), label, tick)

        self.at(self.t + period if first is None else first, label, tick)

    def pending(self) -> int:
        """Actions still queued (cancelled ones included until they come up)."""
        return len(self._queue)

    def run(self, until: float, after_step: Callable[[Step], None] | None = None) -> None:
        """Run queued actions in time order up to simulated second ``until``, then set the time to ``until``.

        Args:
            until: the last simulated second to run.
            after_step: called after each action (the invariant checks); what it raises ends the run.
        """
        queue = self._queue
        while queue and queue[0][0] <= until:
            entry = heapq.heappop(queue)[2]
            if entry.cancelled:
                continue
            self.t = entry.at
            entry.action()
            self.steps += 1
            if after_step is not None:
                after_step(Step(entry.at, entry.label))
        self.t = max(self.t, until)
