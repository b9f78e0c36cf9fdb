"""A surge's capacity effect (``Context.capacity``) asks a MaxSize only to raise it: a group whose MaxSize kOps (a new
spec) or a person set at or above the surge's desired capacity keeps it. Asking ``MaxSize = desired`` lowered such a
MaxSize under the run, and the run then took the value it wrote for its own raise and restored its original over the
spec (storm seed 150835: kOps wrote MaxSize 12 under a surge to 11, the surge wrote 11, the run's end 10). Pure."""

from __future__ import annotations

from datetime import timedelta

from core.runs import StepState
from lambdas.refresher.decide import advance
from tests.unit.lambdas.refresher.decide_world import NODES, OLD, OTHER, SETTINGS, T0, caps, run, sized, world

LATER = T0 + timedelta(seconds=120)


def _surging(original_max: int):  # type: ignore[no-untyped-def]
    r = run(StepState.SURGING, 1, T0)
    group = r.groups[0].model_copy(update={"original_max": original_max})
    return r.model_copy(update={"groups": [group]})


def test_a_raise_again_under_a_max_size_above_it_asks_desired_capacity_only() -> None:
    # orig 2 / MaxSize 2, surged to 3; kOps' new spec made MaxSize 4; the raise was not seen: asked again
    decision = advance(_surging(2), sized(world([OLD, OTHER], 2), max_size=4), SETTINGS, LATER)
    assert caps(decision) == [(NODES, 3, None)]
    assert decision.run.groups[0].max_raised_to is None


def test_a_raise_again_above_the_max_size_raises_it() -> None:
    decision = advance(_surging(2), sized(world([OLD, OTHER], 2), max_size=2), SETTINGS, LATER)
    assert caps(decision) == [(NODES, 3, 3)]
    assert decision.run.groups[0].max_raised_to == 3
