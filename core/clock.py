"""Time as the agent's waits see it: an injectable clock, deadlines on its monotonic scale, and backoff (pure).

``Clock`` is a Protocol so tests drive time by hand; ``SystemClock`` is the real one. ``Deadline`` measures on the
monotonic clock (immune to wall-clock steps) but can be set from a wall-clock instant (``Deadline.at``: a
command's deadline as the Lambda wrote it). ``backoff_delay`` is exponential with equal jitter.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Protocol

# Where ``wall_now`` reads the time: the system clock, unless a simulation installed its own (``use_wall_clock``).
_wall_source: Callable[[], datetime] | None = None


def wall_now() -> datetime:
    """Wall-clock time, aware, UTC, as every ``now`` default of the product reads it (``core.model.utcnow``)."""
    source = _wall_source
    return datetime.now(UTC) if source is None else source()


@contextmanager
def use_wall_clock(source: Callable[[], datetime]) -> Iterator[None]:
    """Within the block, ``wall_now`` (and so every ``utcnow()`` default) answers ``source()``: a simulation's clock.
    Process-wide, not per thread: a simulation runs without threads. Blocks nest; the previous source returns."""
    global _wall_source
    previous = _wall_source
    _wall_source = source
    try:
        yield
    finally:
        _wall_source = previous


class Clock(Protocol):
    """Time as the engine sees it (injectable for tests)."""

    def now(self) -> datetime:
        """Wall-clock time, aware, UTC."""
        ...

    def monotonic(self) -> float:
        """Seconds on a monotonic clock."""
        ...

    def sleep(self, seconds: float, stop: threading.Event) -> bool:
        """Wait ``seconds`` or until ``stop`` is set; True when stopped."""
        ...


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return float(time.monotonic())

    def sleep(self, seconds: float, stop: threading.Event) -> bool:
        return stop.wait(max(0.0, seconds))


class Deadline:
    """A point in time on ``clock``'s monotonic scale.

    Args:
        clock: the clock.
        seconds: seconds from now (negative = already passed).
    """

    def __init__(self, clock: Clock, seconds: float) -> None:
        self.clock = clock
        self.end = clock.monotonic() + seconds
        self._listeners: list[Callable[[], None]] = []

    @classmethod
    def at(cls, when: datetime, clock: Clock) -> Deadline:
        """The deadline at wall-clock ``when`` (aware)."""
        return cls(clock, (when - clock.now()).total_seconds())

    def remaining(self) -> float:
        """Seconds left, never negative."""
        return max(0.0, self.end - self.clock.monotonic())

    @property
    def expired(self) -> bool:
        return self.clock.monotonic() >= self.end

    def on_tighten(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` (no arguments, must not raise) each time ``tighten`` moves the deadline earlier: a
        waiter blocked on a timeout computed from the old deadline wakes up and computes it again."""
        self._listeners.append(listener)

    def tighten(self, when: datetime) -> bool:
        """Move the deadline earlier, to wall-clock ``when`` (aware), if that is earlier; never later.

        Used when a running command's deadline is tightened in its record (a Spot warning for a node already being
        drained for a rebalance recommendation). Returns True when the deadline moved.
        """
        end = self.clock.monotonic() + (when - self.clock.now()).total_seconds()
        if end >= self.end:
            return False
        self.end = end
        for listener in list(self._listeners):
            listener()
        return True


def aware_time(value: object) -> datetime | None:
    """``value`` read as an ISO 8601 time with a zone (as the product writes every time in a table item); None when
    it is no string, unreadable or has no zone, so a forged or legacy item is read as if the time were absent and
    never raises when compared with an aware ``now``. Pure."""
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    return when if when.tzinfo is not None else None


def backoff_delay(attempt: int, base: float, cap: float, rand: Callable[[], float] = random.random) -> float:
    """Seconds to wait before try ``attempt + 1`` after ``attempt`` (>= 1) failed tries (pure but for ``rand``).

    Exponential (``base * 2**(attempt-1)``, capped at ``cap``) with "equal jitter": uniformly within
    [delay/2, delay], so parallel evictions blocked by one budget do not retry in lockstep.
    """
    delay = min(cap, base * 2.0 ** max(0, attempt - 1))
    return delay / 2 + (delay / 2) * rand()
