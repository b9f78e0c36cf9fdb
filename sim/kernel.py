"""The simulation's kernel: simulated time, one seeded event queue, named random streams (no threads, no sleeps).

An action is a plain callable run at its simulated instant; actions at the same instant run in the order they were
scheduled (a sequence number breaks ties), so one seed gives one exact run. Every random draw of the simulation
comes from ``Kernel.stream(name)``: a ``random.Random`` seeded from the run's seed and the stream's name (string
seeds hash with SHA-512, stable across processes and Python runs, unlike ``hash()``), so adding draws to one
component does not shift another's.
"""

from __future__ import annotations

import heapq
import math
import random
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from core.clock import use_wall_clock

# The simulated epoch: a Monday, so a weekly schedule starts on a known day.
EPOCH = datetime(2026, 1, 5, tzinfo=UTC)


def seconds_of(iso: str) -> float:
    """Simulated seconds (since ``EPOCH``) of an ISO 8601 time with its offset (``Z`` or ``+00:00``), as the product
    writes times into items and Kubernetes objects. Raises ValueError when it is not one."""
    return datetime.fromisoformat(iso).timestamp() - EPOCH.timestamp()


class SimulatedSleepError(RuntimeError):
    """Product code tried to block on a sleep inside a simulated step; the simulation has no threads, so a wait must
    be a scheduled action instead (the caller's budget or settings are wrong for the simulation)."""


class Step(NamedTuple):
    """One executed action: its simulated time (seconds since ``EPOCH``) and label (a tuple: made once a step, and a
    named tuple is built in a fraction of a frozen dataclass's time)."""

    at: float
    label: str


class Timer:
    """A scheduled action that can be cancelled before it runs; the queue's entry itself (one object a scheduling:
    ``__slots__`` and a plain ``__init__``, not a dataclass and a wrapper). A periodic one (``Kernel.every``) is the
    same object at each of its runs, queued again by the kernel (``period`` > 0); cancelling it ends them all."""

    __slots__ = ("action", "at", "cancelled", "jitter", "label", "period", "rearm_first", "rng", "seq")
    jitter: float  # the rest of a periodic one's (set by ``Kernel.every``)
    rng: random.Random
    rearm_first: bool

    def __init__(self, at: float, seq: int, label: str, action: Callable[[], None]) -> None:
        self.at = at
        self.seq = seq
        self.label = label
        self.action = action
        self.cancelled = False
        self.period = 0.0  # one run

    def cancel(self) -> None:
        self.cancelled = True


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
        self._queue: list[tuple[float, int, Timer]] = []  # (at, seq, timer): compared as tuples, in C
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
        at = when if when > self.t else self.t
        seq = self._seq
        self._seq = seq + 1
        timer = Timer(at, seq, label, action)
        heapq.heappush(self._queue, (at, seq, timer))
        return timer

    def after(self, delay: float, label: str, action: Callable[[], None]) -> Timer:
        """Run ``action`` ``delay`` seconds from now."""
        return self.at(self.t + delay if delay > 0.0 else self.t, label, action)

    def every(
        self,
        period: float,
        label: str,
        action: Callable[[], None],
        *,
        first: float | None = None,
        jitter: float = 0.0,
        rearm_first: bool = False,
    ) -> Timer:
        """Run ``action`` every ``period`` seconds (> 0; first at ``first``, default one period from now), each time
        shifted by up to ``jitter`` seconds drawn from the stream ``label``; the timer (cancel it to stop).

        Each run is queued again as ``self.after(period + jitter drawn, label, ...)`` would queue it, after
        ``action`` ran (its own schedulings at one instant come first), or before with ``rearm_first`` (a loop that
        sets its next wake before working): one sequence number a run either way, the same object requeued instead
        of a new closure and timer (a week's Auto Scaling reconcile, heartbeats and rule ticks are most of its
        steps).
        """
        if not period > 0.0:
            raise ValueError(f"a period of {period} s: every() needs a positive one")
        timer = self.at(self.t + period if first is None else first, label, action)
        timer.period = period
        timer.jitter = jitter
        timer.rng = self.stream(f"every:{label}")
        timer.rearm_first = rearm_first
        return timer

    def _again(self, timer: Timer) -> None:
        """Queue a periodic ``timer`` again (``every``): as ``after(period + jitter drawn)`` would, same object."""
        delay = timer.period + (timer.rng.uniform(0, timer.jitter) if timer.jitter else 0.0)
        t = self.t
        when = t + delay if delay > 0.0 else t
        at = timer.at = when if when > t else t
        seq = timer.seq = self._seq
        self._seq = seq + 1
        heapq.heappush(self._queue, (at, seq, timer))

    def pending(self) -> int:
        """Actions still queued (cancelled ones included until they come up)."""
        return len(self._queue)

    def run(self, until: float, after_step: Callable[[Step], float | None] | None = None) -> None:
        """Run queued actions in time order up to simulated second ``until``, then set the time to ``until``.

        Args:
            until: the last simulated second to run.
            after_step: called after each action (the invariant checks); what it raises ends the run. It may answer
                the simulated second before which it has nothing to do: it is next called after the first action
                at or after it (None: after the next action). A hook whose checks are due by time (the checker's
                scans) is thus not called after the steps between them, most of a week's.
        """
        queue, pop = self._queue, heapq.heappop
        due = -math.inf  # the hook is called after the first action
        while queue and queue[0][0] <= until:
            entry = pop(queue)[2]
            if entry.cancelled:
                continue
            at = self.t = entry.at
            if entry.period:  # periodic (``every``): queued again before or after its action
                if entry.rearm_first:
                    self._again(entry)
                    entry.action()
                else:
                    entry.action()
                    if not entry.cancelled:
                        self._again(entry)
            else:
                entry.action()
            self.steps += 1
            if after_step is not None and at >= due:
                wake = after_step(Step(at, entry.label))
                due = -math.inf if wake is None else wake
        self.t = max(self.t, until)
