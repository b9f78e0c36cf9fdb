"""Seed 360727 of the ``resize`` profile (30 nodes x 2 days), kept as a regression case of a product bug: "8 no
compensation stuck past its bound" (docs/SIMULATION.md, "Findings").

During an outage of ``us-east-1c`` (9.99 h) kOps resized ``nodes-us-east-1a`` down by 2 (10.00 h: desired capacity
clamped 10 -> 8), and the replenisher raised it to 9 for 1c 1.5 s later, before Auto Scaling had terminated the
clamp's instances: the raise kept one of 1a's baseline instances and launched none. Two more raises (for 1b, then 1c)
launched one instance each. 1c's ledger waited for an instance to claim for its first unit; the plan that gave 1b's
back (12.03 h: its instance terminated with decrement, 1b's ledger cleared) let 1c claim that very instance, which
the next tick read as interrupted, waiting for a replacement that never came. 1c recovered (12.73 h), gave back its
other instance, and held the unit for good: the compensation stayed open past its bound. Now ``claim_all`` skips the
instances the plan terminates (``Builder.claimed_elsewhere``), and the give-back gives back one of the donor's
instances for a unit held with no instance of its own (``give_back.held_by_none``).
"""

from __future__ import annotations

from typing import Any

import pytest

from lambdas.replenisher.decide import give_back
from sim.run import run_seed
from sim.schedules import RESIZE, Fault

INVARIANT_8 = "8 no compensation stuck past its bound"
# the resize profile's entries shrunk (``sim.run.shrink_seed``, on the replenisher before the fix)
SHRUNK = (
    Fault(at=1454.046, kind="bad_event", duration=0.0, params=(("variant", "unmanaged"),)),
    Fault(at=1719.511, kind="late_event", duration=0.0, params=(("delay", 5188),)),
    Fault(at=12255.69, kind="spot", duration=0.0, params=(("az", "us-east-1b"), ("count", 1))),
    Fault(at=19022.556, kind="bad_event", duration=0.0, params=(("variant", "unmanaged"),)),
    Fault(at=21521.941, kind="late_event", duration=0.0, params=(("delay", 20386),)),
    Fault(at=22406.886, kind="late_event", duration=0.0, params=(("delay", 17489),)),
    Fault(at=24145.312, kind="bad_event", duration=0.0, params=(("variant", "foreign_account"),)),
    Fault(at=31169.54, kind="bad_bootstrap", duration=6247.857, params=(("az", "us-east-1c"), ("never", 1))),
    Fault(at=31736.455, kind="spot_burst", duration=564.684, params=(("az", "us-east-1c"), ("count", 2))),
    Fault(at=32470.034, kind="late_event", duration=0.0, params=(("delay", 14772),)),
    Fault(at=33559.282, kind="bad_event", duration=0.0, params=(("variant", "malformed"),)),
    Fault(at=34342.117, kind="bad_event", duration=0.0, params=(("variant", "malformed"),)),
    Fault(at=35960.964, kind="outage", duration=9385.055, params=(("az", "us-east-1c"),)),
    Fault(
        at=36011.258,
        kind="kops_spec",
        duration=0.0,
        params=(("above", 0), ("az", "us-east-1a"), ("below", 0), ("grow", -2)),
    ),
    Fault(at=36123.987, kind="late_event", duration=0.0, params=(("delay", 14543),)),
)


@pytest.mark.parametrize("schedule", [None, SHRUNK], ids=["seed", "shrunk"])
def test_resize_seed_360727_holds(schedule: tuple[Fault, ...] | None) -> None:
    result = run_seed(360727, 30, 2.0, schedule=schedule, profile=RESIZE)
    assert result.violation is None, result.summary()


@pytest.mark.parametrize("schedule", [None, SHRUNK], ids=["seed", "shrunk"])
def test_without_giving_back_an_instance_for_it_the_unit_is_held_for_good(
    monkeypatch: pytest.MonkeyPatch, schedule: tuple[Fault, ...] | None
) -> None:
    def none(*_args: Any) -> list[str]:
        return []

    monkeypatch.setattr(give_back, "held_by_none", none)
    result = run_seed(360727, 30, 2.0, schedule=schedule, profile=RESIZE)
    assert result.violation is not None
    assert result.violation.invariant == INVARIANT_8
    assert "COMP#nodes-us-east-1c" in result.violation.detail, result.violation.detail
