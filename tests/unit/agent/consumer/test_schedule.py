"""Drains wait for a slot earliest deadline first (``agent.consumer.schedule.DeadlineGate``), and for the cordons of
the commands received with them (``CordonsFirst``)."""

from __future__ import annotations

import random
import threading
import time
from datetime import UTC, datetime, timedelta

from agent.consumer.schedule import POLL_SECONDS, CordonsFirst, DeadlineGate, urgent_drain
from tests.unit.agent.consumer_world import wait_until

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


def test_cordons_first_lets_evictions_start_once_every_hold_is_given_back_or_at_its_bound() -> None:
    cordons = CordonsFirst(max_seconds=0.0)
    assert cordons.wait()  # nothing held: at once
    first, second = cordons.hold(), cordons.hold()
    assert cordons.pending() == 2 and not cordons.wait()  # still held when its bound (here 0 s) is reached
    first()
    first()  # a second release of the same hold does not count
    assert cordons.pending() == 1
    second()
    assert cordons.pending() == 0 and cordons.wait()


def test_cordons_first_wakes_a_waiting_drain_when_the_last_hold_is_given_back() -> None:
    cordons = CordonsFirst(max_seconds=30.0)
    release = cordons.hold()
    answers: list[bool] = []
    waiter = threading.Thread(target=lambda: answers.append(cordons.wait()))
    waiter.start()
    wait_until(lambda: cordons.waiting() == 1)
    release()
    waiter.join(10)
    assert answers == [True]
    stopped = cordons.hold()
    assert not cordons.wait(cancelled=lambda: True)  # a cancelled wait ends without the hold given back
    stopped()


def test_a_waiter_retargeted_to_an_earlier_deadline_is_admitted_first() -> None:
    gate = DeadlineGate(1)
    assert gate.acquire(T0)
    admitted: list[str] = []
    threads = [
        threading.Thread(
            target=lambda: (
                gate.acquire(T0 + timedelta(minutes=30), key="refresh"),
                admitted.append("refresh"),
                gate.release(),
            )
        ),
        threading.Thread(
            target=lambda: (
                gate.acquire(T0 + timedelta(minutes=10), key="lifecycle"),
                admitted.append("lifecycle"),
                gate.release(),
            )
        ),
    ]
    for t in threads:
        t.start()
    wait_until(lambda: gate.waiting() == 2)
    assert gate.retarget("refresh", T0 + timedelta(minutes=2)) and not gate.retarget("gone", T0)
    gate.release()
    for t in threads:
        t.join(5)
    assert admitted == ["refresh", "lifecycle"]


def test_an_urgent_waiter_is_admitted_over_the_bound_and_the_others_wait_for_the_slots_it_leaves() -> None:
    gate = DeadlineGate(1)
    assert gate.acquire(T0)
    urgent = threading.Event()
    over: list[bool] = []
    got: list[str] = []
    later = threading.Thread(target=lambda: got.append("later" if gate.acquire(T0 + timedelta(hours=1)) else "-"))
    spot = threading.Thread(
        target=lambda: got.append("spot" if gate.acquire(T0, urgent=urgent.is_set, over_bound=over) else "-")
    )
    later.start()
    spot.start()
    wait_until(lambda: gate.waiting() == 2)
    assert got == []  # not urgent yet: both wait behind the held slot
    urgent.set()  # its deadline came near (``urgent_drain``)
    wait_until(lambda: got == ["spot"])
    assert over == [True] and gate.busy() == 2 and gate.waiting() == 1  # two holders of one slot
    gate.release()
    time.sleep(2 * POLL_SECONDS)
    assert got == ["spot"]  # one holder left is the bound: the later drain still waits
    gate.release()
    later.join(5)
    assert got == ["spot", "later"] and gate.busy() == 1
    gate.release()
    assert gate.busy() == 0


def test_urgent_drain_is_an_ending_instance_with_its_deadline_within_the_window() -> None:
    soon, later = T0 + timedelta(seconds=120), T0 + timedelta(seconds=3600)
    assert urgent_drain(True, soon, T0, 300)
    assert not urgent_drain(False, soon, T0, 300)  # a refresh or rebalance drain can wait: its instance stays
    assert not urgent_drain(True, later, T0, 300)
    assert urgent_drain(True, later, T0 + timedelta(seconds=3300), 300)
    assert not urgent_drain(True, soon, T0, 0)  # 0: off
