"""The limits the replenisher's executor clamps to (lambdas.replenisher.bounds): from Auto Scaling's sizes and the
settings; a ledger can only lower them."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from core.ledger import Compensation, Donor, DonorState, Ledger
from lambdas.replenisher.bounds import capacity_bounds
from lambdas.replenisher.world import World
from tests.unit.lambdas.replenisher.builders import SETTINGS, T0, group, ids


def _ledger(max_before: int) -> Ledger:
    donor = Donor(
        asg_name="b",
        state=DonorState.RAISED,
        raised_by=1,
        desired_before=2,
        max_before=max_before,
        desired_target=3,
        max_target=4,
        raised_at=T0 - timedelta(minutes=1),
    )
    return Ledger(asg_name="a", compensation=Compensation(started_at=T0, donors={"b": donor}))


def test_a_group_without_a_ledger_is_bounded_by_its_own_max_size() -> None:
    b = replace(group("b", "z-b", 2, ids("b", 2), max_size=4), min_size=1)
    bounds = capacity_bounds(World(groups={"b": b}), SETTINGS)["b"]
    assert (bounds.min_size, bounds.max_limit) == (1, 8)  # factor 2 x 4


def test_a_forged_original_cannot_raise_the_limit_a_lower_one_lowers_it() -> None:
    b = group("b", "z-b", 4, ids("b", 4), max_size=6)  # raised from 3 earlier
    assert capacity_bounds(World(groups={"b": b}, ledgers={"a": _ledger(10**6)}), SETTINGS)["b"].max_limit == 12
    assert capacity_bounds(World(groups={"b": b}, ledgers={"a": _ledger(3)}), SETTINGS)["b"].max_limit == 6
