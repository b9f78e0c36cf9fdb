"""The kernel's event queue: time order, the scheduling order among actions at one instant, cancelled timers, periodic
timers requeued, and the steps the checker is shown (``sim.kernel.Kernel.run``)."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from sim.kernel import Kernel, Step


def test_actions_run_in_time_order_and_in_scheduling_order_at_one_instant() -> None:
    kernel = Kernel(1)
    rng = random.Random(3)
    ran: list[tuple[float, int]] = []
    planned = [(float(rng.choice([5, 5, 7, 2, 9, 2])), n) for n in range(60)]
    timers = [kernel.at(at, f"a{n}", lambda at=at, n=n: ran.append((at, n))) for at, n in planned]  # type: ignore[misc]
    for timer in timers[::7]:
        timer.cancel()
    cancelled = set(range(0, 60, 7))
    steps: list[Step] = []
    kernel.run(8.0, steps.append)
    expected = sorted((at, n) for at, n in planned if at <= 8.0 and n not in cancelled)
    assert ran == expected  # by time, then by the order they were scheduled
    assert [(s.at, s.label) for s in steps] == [(at, f"a{n}") for at, n in expected]
    assert kernel.t == 8.0 and kernel.steps == len(expected)
    kernel.run(10.0)
    assert ran[len(expected) :] == sorted((at, n) for at, n in planned if at > 8.0 and n not in cancelled)


def test_an_action_scheduled_in_the_past_runs_now_after_those_already_due() -> None:
    kernel = Kernel(1)
    ran: list[str] = []
    kernel.at(3.0, "first", lambda: (ran.append("first"), kernel.at(1.0, "late", lambda: ran.append("late"))))
    kernel.at(3.0, "second", lambda: ran.append("second"))
    kernel.run(5.0)
    assert ran == ["first", "second", "late"]


def test_a_hook_that_answers_a_time_is_not_called_before_it() -> None:
    kernel = Kernel(1)
    for at in (1.0, 2.0, 3.0, 4.0, 4.0, 6.0, 7.0):
        kernel.at(at, f"a{at}", lambda: None)
    seen: list[float] = []

    def hook(step: Step) -> float | None:
        seen.append(step.at)
        return {1.0: 3.5, 4.0: None, 6.0: 6.0}.get(step.at, 100.0)

    kernel.run(8.0, hook)
    # after 1.0 nothing before 3.5: the next at 4.0; None: the next step (4.0 again); 6.0 asks for 6.0 itself: the
    # next step at or after it (7.0)
    assert seen == [1.0, 4.0, 4.0, 6.0, 7.0]
    assert kernel.steps == 7


def _closures_every(kernel: Kernel, period: float, label: str, action: Callable[[], None], first_rearm: bool) -> None:
    """The periodic runs as closures queueing a new timer (``Kernel.every`` and ``SimAgent._every`` before they
    requeued one timer): the reference the kernel's own requeue must order the same."""

    def tick() -> None:
        if first_rearm:
            kernel.after(period, label, tick)
            action()
        else:
            action()
            kernel.after(period, label, tick)

    kernel.at(kernel.t + period, label, tick)


def _periodic_run(native: bool) -> list[tuple[float, str]]:
    kernel = Kernel(2)
    rng = random.Random(9)
    ran: list[tuple[float, str]] = []

    def action(name: str) -> Callable[[], None]:
        def act() -> None:
            ran.append((kernel.t, name))
            if rng.random() < 0.3:  # a step that schedules work of its own, often at a periodic one's instant
                kernel.after(rng.choice([0.0, 5.0, 10.0, 3.0]), f"{name}-work", lambda: ran.append((kernel.t, "work")))

        return act

    for n, (period, first_rearm) in enumerate([(10.0, True), (10.0, False), (5.0, True), (20.0, False), (10.0, True)]):
        name = f"p{n}"
        if native:
            kernel.every(period, name, action(name), rearm_first=first_rearm)
        else:
            _closures_every(kernel, period, name, action(name), first_rearm)
    kernel.run(2000.0)
    return ran


def test_periodic_timers_run_in_the_order_closures_queueing_new_timers_gave() -> None:
    native = _periodic_run(native=True)
    assert native == _periodic_run(native=False)
    assert len(native) > 1000


def test_a_cancelled_periodic_timer_stops_and_a_jittered_one_draws_from_its_stream() -> None:
    kernel = Kernel(3)
    ran: list[float] = []
    timer = kernel.every(10.0, "p", lambda: ran.append(kernel.t))
    kernel.at(35.0, "stop", timer.cancel)
    kernel.every(60.0, "j", lambda: ran.append(-kernel.t), jitter=5.0)
    kernel.run(200.0)
    draws = random.Random("3:every:j")
    expected, t = [], 60.0
    while t <= 200.0:
        expected.append(-t)
        t = t + (60.0 + draws.uniform(0, 5.0))
    assert [x for x in ran if x >= 0] == [10.0, 20.0, 30.0]
    assert [x for x in ran if x < 0] == expected
    with pytest.raises(ValueError):
        kernel.every(0.0, "none", lambda: None)
