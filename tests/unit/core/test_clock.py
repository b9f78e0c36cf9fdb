"""Clock, deadline and backoff (``core.clock``)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from core.clock import Deadline, backoff_delay

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


class FakeClock:
    """A clock that moves only when told (or when slept on)."""

    def __init__(self) -> None:
        self.t = 1000.0

    def now(self) -> datetime:
        return T0 + timedelta(seconds=self.t - 1000.0)

    def monotonic(self) -> float:
        return self.t

    def sleep(self, seconds: float, stop: threading.Event) -> bool:
        self.t += seconds
        return stop.is_set()


def test_backoff_doubles_up_to_the_cap_with_jitter_within_half() -> None:
    assert backoff_delay(1, 0.5, 5.0, rand=lambda: 1.0) == pytest.approx(0.5)
    assert backoff_delay(2, 0.5, 5.0, rand=lambda: 1.0) == pytest.approx(1.0)
    assert backoff_delay(3, 0.5, 5.0, rand=lambda: 1.0) == pytest.approx(2.0)
    assert backoff_delay(10, 0.5, 5.0, rand=lambda: 1.0) == pytest.approx(5.0)
    assert backoff_delay(10, 0.5, 5.0, rand=lambda: 0.0) == pytest.approx(2.5)
    assert backoff_delay(1, 0.5, 5.0, rand=lambda: 0.0) == pytest.approx(0.25)


def test_deadline_counts_down_on_the_injected_clock() -> None:
    clock = FakeClock()
    deadline = Deadline.at(clock.now() + timedelta(seconds=10), clock)
    assert deadline.remaining() == pytest.approx(10)
    clock.sleep(4, threading.Event())
    assert deadline.remaining() == pytest.approx(6) and not deadline.expired
    clock.sleep(7, threading.Event())
    assert deadline.remaining() == 0 and deadline.expired
    assert Deadline(clock, -1).expired


def test_a_deadline_is_tightened_only_earlier_and_wakes_its_waiters() -> None:
    clock = FakeClock()
    deadline = Deadline(clock, 600)
    woken: list[int] = []
    deadline.on_tighten(lambda: woken.append(1))
    assert not deadline.tighten(T0 + timedelta(seconds=900))  # later: ignored
    assert deadline.remaining() == pytest.approx(600) and woken == []
    assert deadline.tighten(T0 + timedelta(seconds=120))
    assert deadline.remaining() == pytest.approx(120) and woken == [1]
    clock.t += 120
    assert deadline.expired
