"""Storm seed 192076 (12 nodes x 1 day, one master; the same on the code before 2026-12-07's session), kept as a
regression case of a product bug: a MaxSize kOps raised restored below ("4 sizes end where they were").

``nodes-us-east-1b`` (4 / MaxSize 5) was raised to desired 5 for ``nodes-us-east-1a`` (5 fits: the raise's MaxSize
is 5); kOps' new spec then wrote MaxSize 6; the replenisher raised it to desired 6 for ``nodes-us-east-1c`` (6 fits).
That second ledger recorded as 1b's original MaxSize the first ledger's (5: ``Builder.original_max`` was the smallest
recorded), and its give-back restored MaxSize 5 under kOps' 6. Fixed in ``Builder.original_max``: a MaxSize above
every MaxSize a raise set is kOps' (or a person's), the donor's original from then on; ``asks.hand_over_raise`` hands
it over to a ledger still carrying an older raise (``tests/unit/lambdas/replenisher/decide/test_give_back_kops_max.py``
keeps the pure cases).
"""

from __future__ import annotations

from sim.run import run_seed
from tests.unit.sim.storm_profiles import STORM_BEFORE_FOREIGN


def test_a_max_size_kops_raised_over_a_raise_is_not_restored_by_a_second_raise() -> None:
    result = run_seed(192076, 12, 1.0, profile=STORM_BEFORE_FOREIGN, masters=1)
    assert result.violation is None, result.summary()


def test_a_max_size_kops_raised_between_two_raises_of_one_ledger_is_not_restored() -> None:
    """Storm seed 220134 (30 x 2): the same, both raises of ``nodes-us-east-1a`` for ``nodes-us-east-1b``'s ledger
    (10 / MaxSize 11 raised to 11; kOps wrote MaxSize 12; raised to 12): the record kept its first original, and the
    give-back restored MaxSize 11 under kOps' 12 (``compensate``: a record already there takes the new original)."""
    result = run_seed(220134, 30, 2.0, profile=STORM_BEFORE_FOREIGN)
    assert result.violation is None, result.summary()
