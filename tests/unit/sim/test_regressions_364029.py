"""Seed 364029 of the ``resize`` profile (30 nodes x 2 days), kept as a regression case of a product bug: "4 sizes end
where they were" broken by a refresh's surge unit left raised (docs/SIMULATION.md, "Findings").

A refresh of ``nodes-us-east-1a`` with ``max_surge`` 2 (36.86 h) handed step 1's unit to step 3 (133,050.7 s) and step
2's to step 4 (133,060.9 s), each successor's spare to be Auto Scaling's replacement of the old instance terminated
without decrement. The first replacement launched between the two hand-overs, so it was in step 4's baseline; step 3
claimed the second replacement, Ready first, and step 4 had none it could see. A PodDisruptionBudget then timed step
3's drain out and the run gave its surge back: step 4 waited for a spare to launch, for good, and its unit was left
raised past the give-back's deadline (900 s), the run ``failed``: 1a ended at desired capacity 11 and MaxSize 11, its
kOps size 10. A successor's baseline now leaves out the instances new to another step still waiting for its spare
(``handover.successor_baseline``). The shrinker kept 75 of the schedule's entries in its 60 runs: the seed alone is
kept.
"""

from __future__ import annotations

import pytest

from lambdas.refresher.decide import handover
from sim.run import run_seed
from sim.schedules import RESIZE
from tests.unit.sim.handover_baseline import whole_group_but_the_old


def test_resize_seed_364029_holds() -> None:
    result = run_seed(364029, 30, 2.0, profile=RESIZE)
    assert result.violation is None, result.summary()


def test_with_the_whole_group_as_the_successor_s_baseline_the_unit_is_left_raised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(handover, "successor_baseline", whole_group_but_the_old)
    result = run_seed(364029, 30, 2.0, profile=RESIZE)
    assert result.violation is not None
    assert result.violation.invariant == "4 sizes end where they were"
    assert "nodes-us-east-1a ends at desired 11 MaxSize 11, was 10/10" in result.violation.detail
