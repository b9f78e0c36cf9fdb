"""Mutation tests of the fleet simulation (issue 12, "Done when"): each known bug put back by a patch of the product's
code (``sim.mutants``), one at a time, must be reported as an invariant or liveness violation, and the same run
without the patch must hold every invariant (the finding is the bug's, not the simulation's).

Two kinds: a short hand-written schedule per mutant (the faults it needs, at known times: fast), and a short random
hunt (seeds from 0 with the mutant's profile until one fails, at most ``HUNT_SEEDS``; the long one is ``python -m
sim.mutants --seeds 300``, ``make mutants``) whose finding seed is run again without the patch (``slow``).
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
    # the same compensation, given back while Auto Scaling refuses every terminate for ten minutes (under the
    # give-back's deadline, REPLENISH_GIVE_BACK_TIMEOUT_SECONDS: a refusal longer than it is taken as for good, and the
    # correct product closes the give-back out with the units left raised, which "sizes end where they were" reports);
    # counted as given back, the refused instance stayed drained and cordoned, nothing uncordoning it, and the
    # donor's MaxSize restore made Auto Scaling scale in an instance of its own choosing instead. The hunt still finds
    # the mutant (seed 23); this schedule no longer does (``MISSED``)
    "refused_terminate_given_back": (
        (
            _f(600.0, "outage", 7200.0, az=A),
            _f(900.0, "spot_burst", 60.0, az=A, count=3),
            _f(
                7800.0,
                "api",
                600.0,
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


# Mutants their hand-written schedule no longer finds, and why. refused_terminate_given_back: since the give-back's
# asks are read back (a MaxSize restore counted only once read back keeps the compensation open, so the next
# invocation finds the terminate recorded done with its instance still in the donor and asks it again; past the
# deadline the instance is kept and uncordoned), a refused terminate counted as done no longer leaves a cordon; its
# remaining harm, the restore asked under the desired capacity Auto Scaling still holds (a scale-in of Auto Scaling's
# choosing, undrained), is no invariant the simulation checks on Auto Scaling's own terminations.
MISSED = {"refused_terminate_given_back"}


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.xfail(strict=True, reason="see MISSED")) if n in MISSED else n
        for n in sorted(SCENARIOS)
    ],
)
def test_the_mutant_breaks_an_invariant(name: str) -> None:
    violation = _run(name, mutated=True)
    assert violation is not None, f"{name} not found"
    assert getattr(violation, "invariant", None) == SCENARIOS[name][2], violation


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_without_the_mutant_the_same_run_holds(name: str) -> None:
    assert _run(name, mutated=False) is None


# How many seeds (from 0, each mutant's profile) the default test run hunts before it calls a mutant missed. The
# seed that finds a mutant first moves whenever the product's code changes what a seed draws or how a run goes (the
# hunt of 2026-12-02 found them at seeds 7 / 8 / 0 / 0 / 6 / 8: BENCHMARKS.md, "Mutation testing of the
# simulation"; in the afternoon, after the lock profile drew its concurrent windows between the two lock takers only,
# at 7 / 23 / 0 / 0 / 6 / 11 for refresh_no_deadline / refused_terminate_given_back / cordon_behind_slots /
# rebalance_cordon_kept / ledger_ignores_reset / lock_not_atomic), so the test hunts instead of replaying a recorded
# seed; the long hunt (300 seeds) is ``make mutants``.
HUNT_SEEDS = 30


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_a_short_random_hunt_finds_the_mutant_and_its_seed_holds_without_it(name: str) -> None:
    found = hunt(name, range(HUNT_SEEDS))
    assert found.violation is not None and found.seed is not None, f"{name} not found in seeds 0-{HUNT_SEEDS - 1}"
    control = hunt(name, range(found.seed, found.seed + 1), control=True)
    assert control.violation is None, (found.seed, control.violation)


def test_every_mutant_has_a_hand_written_schedule() -> None:
    assert sorted(SCENARIOS) == sorted(MUTANTS)
