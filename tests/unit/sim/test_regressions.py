"""Seeds the simulation found product bugs with, kept as regression cases (issue 12: "each finding is fixed, with its
seed kept as a regression case"). Each names the bug and must hold on the fixed product.

- Seeds 6 and 7 of the ``lock_not_atomic`` mutant's profile, **without** the patch (six outages and 24 concurrency
  windows a day, 12 nodes, 1 day): a donor group raised for two failed groups in turn (``nodes-us-east-1c`` for
  ``nodes-us-east-1a`` then for ``nodes-us-east-1b``) recorded the first raise as its own size in the second ledger.
  When the first compensation was given back and cleared, the replenisher's reconcile with reality read the
  donor's drop as a kOps reset (it "holds 0 of the 1 it carries"), stopped counting the second group's instance,
  and the second give-back restored MaxSize to the first raise: the donor ended at 5/5 instead of 4/4 (invariant 4,
  "sizes end where they were"). Fixed in ``lambdas.replenisher.decide.compensate.own_sizes`` (and
  ``reality.reconcile_donors`` rebasing on the donor's own size).
- Seed 1280 of ``make soak`` (12 nodes, 1 day), shrunk to two faults: a manual refresh of ``nodes-us-east-1a`` and
  Auto Scaling throttling 30 % of calls for 4 minutes. The pass that ended the run saved it ``succeeded`` with MaxSize
  "restored" and then asked UpdateAutoScalingGroup, which was throttled: nothing ever asked again, and the group
  ended at desired 4 / MaxSize 5 instead of 4/4 (invariant 4). Fixed in
  ``lambdas.refresher.decide.lifecycle.finish_groups``: the restore is done only once a later pass reads it back.
  The test slides the throttling window over the run's end instead of keeping the shrunk schedule's.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from sim.mutants import MUTANTS
from sim.run import run_seed
from sim.schedules import Fault, Profile

# the lock profile as it was when seeds 6 and 7 were found: concurrent windows of any function at calls 1-8 (the
# profile now draws them between the lock takers only, which gives the same seeds other faults)
LOCK_PROFILE_FIRST = replace(
    MUTANTS["lock_not_atomic"].profile, concurrent_calls=Profile().concurrent_calls, functions=Profile().functions
)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [6, 7])
def test_a_donor_shared_by_two_compensations_ends_where_it_was(seed: int) -> None:
    result = run_seed(seed, 12, 1.0, profile=LOCK_PROFILE_FIRST, trace=True)
    assert result.violation is None, result.summary()
    notes = [line for line in result.trace if "size_reset" in line]
    assert not notes, notes[:1]  # no give-back read as a reset (the profile has no kOps reset)


def test_a_throttled_max_size_restore_at_a_runs_end_is_asked_again() -> None:
    """Seed 1280's two faults, with the throttling window slid over the run's end (the run's timing moves whenever
    the refresher's passes change, so one recorded window would soon miss it): 24 windows, half the Auto Scaling
    calls throttled. Before the fix 2 of them ended with MaxSize raised; some must throttle the refresher."""
    refresh = Fault(at=80.863, kind="manual_refresh", duration=0.0, params=(("az", "us-east-1a"),))
    throttled = 0
    for start in range(540, 900, 15):
        throttle = Fault(
            at=float(start),
            kind="api",
            duration=240.0,
            params=(("code", "Throttling"), ("operation", ""), ("probability", 0.5), ("service", "autoscaling")),
        )
        result = run_seed(1280, 12, 0.05, schedule=(refresh, throttle), trace=True)
        assert result.violation is None, f"throttled from {start} s: {result.summary()}"
        throttled += any("refresher error" in line and "UpdateAutoScalingGroup" in line for line in result.trace)
    assert throttled, "no window throttles the refresher any more: move the windows (make soak found the case)"
