"""Mutation tests of the fleet simulation (issue 12, "Done when"): each known bug put back by a patch of the product's
code (``sim.mutants``), one at a time, must be reported as an invariant or liveness violation, and the same run
without the patch must hold every invariant (the finding is the bug's, not the simulation's).

Two kinds: a short hand-written schedule per mutant (the faults it needs, at known times: fast), and the seed the
random hunt of the issue found first (``python -m sim.mutants --seeds 300``, ``make mutants``: seeds from 0 with the
mutant's profile until one fails), replayed with and without the patch (``slow``: two simulated days a mutant).
"""

from __future__ import annotations

import pytest

from sim.mutants import MUTANTS, applied, hunt
from sim.run import run_seed
from sim.schedules import Fault

A, B, C = "us-east-1a", "us-east-1b", "us-east-1c"


def _f(at: float, kind: str, duration: float = 0.0, **params: str | int) -> Fault:
    return Fault(at, kind, duration, tuple(sorted(params.items())))


# mutant -> (schedule, days, the invariant that reports it)
SCENARIOS: dict[str, tuple[tuple[Fault, ...], float, str]] = {
    # a refresh of AZ a while a has no capacity: the spare never launches; the wait must end at its deadline
    "refresh_no_deadline": (
        (_f(600.0, "outage", 4 * 3600.0, az=A), _f(700.0, "manual_refresh", az=A)),
        0.1,
        "8 no refresh wait past its deadline",
    ),
    # four warnings in one minute, two drain slots: the waiting drains' nodes must be cordoned at once
    "cordon_behind_slots": (
        (_f(3600.0, "spot_burst", 60.0, az=A, count=4),),
        0.06,
        "5 a drained node is cordoned at once",
    ),
    # a rebalance recommendation no interruption follows: its cordon must be undone
    "rebalance_cordon_kept": (
        (_f(600.0, "rebalance", 0.0, az=A, follow=0),),
        0.25,
        "8 a cordon of ours is resolved within a bound",
    ),
    # AZ a out of capacity, three of its instances reclaimed (compensated by b and c), then kOps resets b and c
    "ledger_ignores_reset": (
        (
            _f(600.0, "outage", 7200.0, az=A),
            _f(900.0, "spot_burst", 60.0, az=A, count=3),
            _f(3000.0, "kops_reset", az=B),
            _f(3000.0, "kops_reset", az=C),
        ),
        0.5,  # long enough for the correct product to give everything back
        "8 every shortfall covered within a bound",
    ),
    # the same compensation, given back while Auto Scaling refuses every terminate for an hour: the instance refused
    # stays, drained and cordoned; counted as given back, nothing ever uncordons it (and the donor's MaxSize restore
    # makes Auto Scaling scale in an instance of its own choosing instead)
    "refused_terminate_given_back": (
        (
            _f(600.0, "outage", 7200.0, az=A),
            _f(900.0, "spot_burst", 60.0, az=A, count=3),
            _f(
                7800.0,
                "api",
                3600.0,
                service="autoscaling",
                operation="TerminateInstanceInAutoScalingGroup",
                code="ScalingActivityInProgress",
                probability=1,
            ),
        ),
        0.35,
        "8 a cordon of ours is resolved within a bound",
    ),
    # the same compensation, with a duplicate replenisher run whole between the lock's read and its write
    "lock_not_atomic": (
        (
            _f(600.0, "outage", 7200.0, az=A),
            _f(900.0, "spot_burst", 60.0, az=A, count=3),
            _f(800.0, "concurrent", 3000.0, call=3, function="replenisher", other="replenisher"),
        ),
        0.5,
        "8 one lock holder at a time",
    ),
}


def _run(name: str, mutated: bool) -> object:
    schedule, days, _ = SCENARIOS[name]
    with applied(name, patch=mutated):
        return run_seed(1, 12, days, schedule=schedule).violation


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_mutant_breaks_an_invariant(name: str) -> None:
    violation = _run(name, mutated=True)
    assert violation is not None, f"{name} not found"
    assert getattr(violation, "invariant", None) == SCENARIOS[name][2], violation


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_without_the_mutant_the_same_run_holds(name: str) -> None:
    assert _run(name, mutated=False) is None


# mutant -> (the first seed from 0 of its profile that finds it, the invariant reported): ``python -m sim.mutants``
# (BENCHMARKS.md, "Mutation testing of the simulation"). The hunt itself (up to 300 seeds a mutant) is ``make
# mutants``; the default test run replays the finding seed, and the same seed without the patch must hold.
FIRST_SEEDS: dict[str, tuple[int, str]] = {
    "refresh_no_deadline": (7, "8 no refresh wait past its deadline"),
    "refused_terminate_given_back": (8, "8 a cordon of ours is resolved within a bound"),
    "cordon_behind_slots": (0, "5 a drained node is cordoned at once"),
    "rebalance_cordon_kept": (0, "8 a cordon of ours is resolved within a bound"),
    "ledger_ignores_reset": (6, "8 every shortfall covered within a bound"),
    "lock_not_atomic": (8, "8 one lock holder at a time"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FIRST_SEEDS))
def test_the_seed_the_hunt_found_finds_the_mutant_and_holds_without_it(name: str) -> None:
    seed, invariant = FIRST_SEEDS[name]
    found = hunt(name, range(seed, seed + 1))
    assert found.violation is not None, f"{name} not found by seed {seed}"
    assert found.violation.invariant == invariant, found.violation
    control = hunt(name, range(seed, seed + 1), control=True)
    assert control.violation is None, control.violation


def test_every_mutant_has_a_finding_seed() -> None:
    assert sorted(FIRST_SEEDS) == sorted(MUTANTS)
