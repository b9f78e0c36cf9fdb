"""The kernel's event queue: time order, the scheduling order among actions at one instant, cancelled timers, and
the steps the checker is shown (``sim.kernel.Kernel.run``)."""

from __future__ import annotations

import random

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
