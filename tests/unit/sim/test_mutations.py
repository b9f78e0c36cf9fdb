"""Mutation tests of the fleet simulation (issue 12, "Done when"): each known bug put back by a patch of the product's
code (``sim.mutants``), one at a time; random seeds must find it as an invariant or liveness violation, and the same
seeds must hold every invariant without the patch (the finding is the bug's, not the simulation's).

The fast tests run a few fixed seeds of each mutant (the first ones a longer hunt found); the ``slow`` test hunts
over up to 300 seeds from seed 0, as ``python -m sim.mutants --seeds 300`` does.
"""

from __future__ import annotations

import pytest

from sim.mutants import MUTANTS, hunt

# mutant -> (seeds the fast test runs, the invariants that may report it)
FAST: dict[str, tuple[range, tuple[str, ...]]] = {
    "refresh_no_deadline": (range(3), ("8 no refresh wait past its deadline", "8 no run stuck past its deadline")),
    "refused_terminate_given_back": (range(3), ("4 sizes end where they were", "4 nothing detached left running")),
    "cordon_behind_slots": (range(3), ("5 a drained node is cordoned at once",)),
    "rebalance_cordon_kept": (range(1), ("8 a cordon of ours is resolved within a bound",)),
    "ledger_ignores_reset": (range(3), ("4 sizes end where they were",)),
    "lock_not_atomic": (range(3), ("8 one lock holder at a time",)),
}


@pytest.mark.parametrize("name", sorted(FAST))
def test_random_seeds_find_the_mutant(name: str) -> None:
    seeds, invariants = FAST[name]
    found = hunt(name, seeds)
    assert found.violation is not None, f"{name} not found in seeds {seeds}"
    assert found.violation.invariant in invariants, found.violation


@pytest.mark.parametrize("name", sorted(FAST))
def test_the_same_seeds_hold_without_the_mutant(name: str) -> None:
    seeds, _ = FAST[name]
    found = hunt(name, seeds, control=True)
    assert found.violation is None, found.violation


def test_every_mutant_has_a_fast_test() -> None:
    assert sorted(FAST) == sorted(MUTANTS)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FAST))
def test_a_few_hundred_random_seeds_find_the_mutant(name: str) -> None:
    found = hunt(name, range(300))
    assert found.violation is not None, f"{name} not found in 300 seeds"
