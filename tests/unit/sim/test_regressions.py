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
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from sim.mutants import MUTANTS
from sim.run import run_seed
from sim.schedules import Profile

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
