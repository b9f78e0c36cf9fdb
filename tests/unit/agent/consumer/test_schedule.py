"""Drains wait for a slot earliest deadline first (``agent.consumer.schedule.DeadlineGate``)."""

from __future__ import annotations

import random
import threading
import time
from datetime import UTC, datetime, timedelta

from agent.consumer.schedule import DeadlineGate

T0 = datetime(2026, 12, 2, 4, 0, tzinfo=UTC)


def test_a_free_slot_goes_to_the_earliest_deadline_whatever_the_arrival_order() -> None:
    gate = DeadlineGate(1)
    assert gate.acquire(T0)  # the one slot is held
    offsets = list(range(10))
    random.Random(7).shuffle(offsets)
    admitted: list[int] = []
    lock = threading.Lock()

    def wait(offset: int) -> None:
        assert gate.acquire(T0 + timedelta(seconds=offset))
        with lock:
            admitted.append(offset)
        time.sleep(0.01)
        gate.release()

    threads = [threading.Thread(target=wait, args=(o,)) for o in offsets]
    for t in threads:
        t.start()
        time.sleep(0.005)
    deadline = time.monotonic() + 5
    while gate.waiting() < len(offsets):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    gate.release()
    for t in threads:
        t.join(5)
    assert admitted == sorted(offsets)


def test_at_most_slots_holders_and_a_cancelled_wait_ends_without_a_slot() -> None:
    gate = DeadlineGate(2)
    assert gate.acquire(T0) and gate.acquire(T0)
    assert gate.busy() == 2
    cancel = threading.Event()
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(gate.acquire(T0, cancelled=cancel.is_set)))
    waiter.start()
    time.sleep(0.1)
    assert got == [] and gate.waiting() == 1
    cancel.set()
    waiter.join(5)
    assert got == [False] and gate.waiting() == 0 and gate.busy() == 2
    gate.release()
    assert gate.acquire(T0 + timedelta(seconds=1)) and gate.busy() == 2
