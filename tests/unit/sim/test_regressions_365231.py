"""Seed 365231 of the ``resize`` profile (30 nodes x 2 days), kept as a regression case of a product bug: "4 sizes end
where they were" broken by a MaxSize kOps lowered under a compensation, restored above it (docs/SIMULATION.md,
"Findings").

The replenisher raised ``nodes-us-east-1c`` 10 -> 11 for 1b (16.98 h), within its MaxSize 12 (the record's
``max_before`` 12, no MaxSize raised). kOps resized 1c down by 1 (17.68 h: MinSize 8, MaxSize 11; desired capacity 11
still held), and the record kept 12 as 1c's original. A second raise for 1b took 1c to 12 and MaxSize 12, which hid
kOps' 11 from ``Builder.original_max`` (the MaxSize read now), and the give-back left 1c at MaxSize 12, one above kOps'.
A MaxSize below every record's original is now written into every record as the donor's own (``reality._own_max``).
"""

from __future__ import annotations

from typing import Any

import pytest

from core.ledger import Donor
from lambdas.replenisher.decide import reality
from sim.run import run_seed
from sim.schedules import RESIZE, Fault

# the resize profile's entries shrunk (``sim.run.shrink_seed``, on the replenisher before the fix)
SHRUNK = (
    Fault(at=0.0, kind="kops_spec", duration=0.0, params=(("above", 2), ("az", "us-east-1c"), ("below", 1))),
    Fault(at=60734.758, kind="outage", duration=11108.605, params=(("az", "us-east-1b"),)),
    Fault(
        at=61130.396,
        kind="kops_spec",
        duration=0.0,
        params=(("above", 0), ("az", "us-east-1b"), ("below", 0), ("grow", 2)),
    ),
    Fault(
        at=63657.931,
        kind="kops_spec",
        duration=0.0,
        params=(("above", 2), ("az", "us-east-1c"), ("below", 1), ("grow", -1)),
    ),
    Fault(at=65612.769, kind="operator_cordon", duration=6679.203, params=(("az", "us-east-1c"),)),
    Fault(
        at=66889.291,
        kind="kops_spec",
        duration=0.0,
        params=(("above", 1), ("az", "us-east-1a"), ("below", 0), ("grow", -1)),
    ),
)


def without_the_lower_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """``_own_max`` as before: only a MaxSize above every raise is the donor's own."""
    own_max = reality._own_max

    def above_only(b: Any, donor: str) -> None:
        records: list[Donor] = b.donor_records(donor)
        group = b.world.groups.get(donor)
        if group is not None and records and group.max_size < min(r.max_before for r in records):
            return
        own_max(b, donor)

    monkeypatch.setattr(reality, "_own_max", above_only)


@pytest.mark.parametrize("schedule", [None, SHRUNK], ids=["seed", "shrunk"])
def test_resize_seed_365231_holds(schedule: tuple[Fault, ...] | None) -> None:
    result = run_seed(365231, 30, 2.0, schedule=schedule, profile=RESIZE)
    assert result.violation is None, result.summary()


@pytest.mark.parametrize("schedule", [None, SHRUNK], ids=["seed", "shrunk"])
def test_without_the_rule_kops_max_size_is_restored_above(
    monkeypatch: pytest.MonkeyPatch, schedule: tuple[Fault, ...] | None
) -> None:
    without_the_lower_rule(monkeypatch)
    result = run_seed(365231, 30, 2.0, schedule=schedule, profile=RESIZE)
    assert result.violation is not None
    assert result.violation.invariant == "4 sizes end where they were"
    assert "nodes-us-east-1c ends at desired 10 MaxSize 12, was 10/11" in result.violation.detail, (
        result.violation.detail
    )
