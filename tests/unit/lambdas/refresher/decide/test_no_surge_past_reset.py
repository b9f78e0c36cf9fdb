"""A run never starts a surge while its group's MaxSize reads below the run's original (kOps' new spec, or a person,
lowered it under the run): the surge would raise MaxSize back over the spec, and the run's restore at its end would
leave the group at its old MaxSize (storm seed 152576: a spec edit to MaxSize 10 under a run that found 11; the next
step's surge wrote 12, the restore 11). The run pauses, as a reset under a surge pauses it (``worker.surging``).
Pure."""

from __future__ import annotations

from datetime import timedelta

from core.runs import RunStatus, StepState
from lambdas.refresher.decide import advance
from tests.unit.lambdas.refresher.decide_world import OLD, OTHER, SETTINGS, T0, caps, run, sized, world

LATER = T0 + timedelta(seconds=60)


def _pending_with_max_raised() -> object:
    r = run(StepState.PENDING, 0, T0)
    group = r.groups[0].model_copy(update={"original_max": 4, "max_raised_to": 5})
    return r.model_copy(update={"groups": [group]})


def test_no_surge_while_max_size_reads_below_the_original() -> None:
    decision = advance(_pending_with_max_raised(), sized(world([OLD, OTHER], 2), max_size=3), SETTINGS, LATER)  # type: ignore[arg-type]
    assert caps(decision) == []
    assert decision.run.status in (RunStatus.PAUSING, RunStatus.PAUSED)
    assert "reset to 3" in decision.run.reason


def test_a_surge_starts_at_the_original_max_size() -> None:
    decision = advance(_pending_with_max_raised(), sized(world([OLD, OTHER], 2), max_size=4), SETTINGS, LATER)  # type: ignore[arg-type]
    assert caps(decision) == [("nodes-a.c", 3, None)]
