"""Shrinking a failing schedule: delta debugging over its entries (Zeller and Hildebrandt, "Simplifying and Isolating
Failure-Inducing Input", IEEE TSE 2002): drop chunks, halving their size down to single entries, keeping every
removal after which the run still breaks the same invariant (issue 12)."""

from __future__ import annotations

from collections.abc import Callable

from sim.schedules import Fault


def shrink(
    seed: int,
    schedule: tuple[Fault, ...],
    fails: Callable[[tuple[Fault, ...]], str | None],
    budget: int = 200,
) -> tuple[Fault, ...]:
    """The shortest sub-schedule of ``schedule`` found for which ``fails`` still answers the same invariant.

    Args:
        seed: the seed (for the caller's ``fails``; named here for the log).
        schedule: a failing schedule.
        fails: runs a schedule, answers the broken invariant's name or None.
        budget: at most this many runs.
    """
    target = fails(schedule)
    if target is None:
        return schedule
    current = list(schedule)
    chunk = max(1, len(current) // 2)
    runs = 1
    while chunk >= 1 and runs < budget:
        removed = False
        i = 0
        while i < len(current) and runs < budget:
            candidate = current[:i] + current[i + chunk :]
            runs += 1
            if fails(tuple(candidate)) == target:
                current = candidate
                removed = True
            else:
                i += chunk
        if not removed:
            if chunk == 1:
                break
            chunk = max(1, chunk // 2)
    return tuple(current)
