"""sim.run.shrink: delta debugging keeps only the entries the failure needs."""

from __future__ import annotations

from sim.schedules import Fault
from sim.shrink import shrink


def test_shrink_keeps_the_entries_that_make_it_fail() -> None:
    schedule = tuple(Fault(float(i), "spot") for i in range(40))
    runs: list[int] = []

    def fails(candidate: tuple[Fault, ...]) -> str | None:
        runs.append(len(candidate))
        times = {f.at for f in candidate}
        return "3 no termination before drain" if {7.0, 23.0} <= times else None

    assert [f.at for f in shrink(0, schedule, fails)] == [7.0, 23.0]
    assert len(runs) < 100


def test_shrink_of_a_passing_schedule_is_itself() -> None:
    schedule = (Fault(1.0, "spot"),)
    assert shrink(0, schedule, lambda s: None) == schedule


def test_shrink_keeps_the_same_invariant() -> None:
    schedule = tuple(Fault(float(i), "spot") for i in range(8))

    def fails(candidate: tuple[Fault, ...]) -> str | None:
        if len(candidate) == 8:
            return "A"
        return "B" if candidate else None  # any smaller schedule breaks another invariant: not a reduction

    assert shrink(0, schedule, fails) == schedule
