"""Two hand-overs in one group (``max_surge`` 2), the first one's replacement launched between them and Ready only
after the second one's (resize seed 364029, ``handover.successor_baseline``): the second successor's baseline leaves
the first replacement out, so either successor may claim either replacement. The first successor takes the second
replacement (Ready first) and the second successor the first (Ready later): each has a spare of its own, whether the
run goes on or stops with both in flight. With the whole group as the second successor's baseline, the first
replacement was in it: the second successor saw no spare, and a stop left its unit raised. Pure."""

from __future__ import annotations

import pytest

from core.runs import RunStatus, RunStep, StepState
from lambdas.refresher.decide import handover
from lambdas.refresher.decide.context import Context
from lambdas.refresher.world import GroupFacts
from tests.unit.lambdas.refresher.decide.handover_driver import OLDS, Driver, Slow
from tests.unit.lambdas.refresher.decide.lifecycle_model import iid, new_run

OLD5, OLD6 = iid(6), iid(7)
SIX = [*OLDS, OLD5, OLD6]


def _done(model: Slow, step: int) -> None:
    """The agent ends step ``step``'s drain (kept running by ``Slow.drains_run``)."""
    model.commands[f"refresh-r1-{step}"]["status"] = "succeeded"


def _two_hand_overs(fixed: bool = True) -> tuple[Slow, Driver, str, str]:
    """Steps 1 and 2 drain together; step 1 hands its unit to step 3, Auto Scaling launches its replacement (not
    Ready), then step 2 hands its unit to step 4 and the second replacement launches, Ready; step 3 claims it.
    Returns the model, the driver, the first and the second replacement. ``fixed``: the second successor's baseline
    is ``successor_baseline``'s (False: the whole group but the old instance, as before)."""
    model = Slow(list(SIX), desired=6, max_size=6)
    driver = Driver(model, new_run(model, SIX, max_surge=2))
    driver.until(lambda d: d.run.canary_passed)
    model.drains_run = True
    driver.until(lambda d: d.run.steps[1].state is d.run.steps[2].state is StepState.DRAINING)
    driver.invocation()
    assert driver.run.steps[1].state is driver.run.steps[2].state is StepState.DRAINING
    model.ready = False  # the first replacement is slow to be Ready
    _done(model, 1)
    driver.invocation()
    assert driver.run.steps[1].handed_over_to == 3 and driver.run.steps[3].state is StepState.SURGING
    first = model.instances[-1]
    assert first in model.not_ready
    model.ready = True
    _done(model, 2)
    driver.invocation()
    assert driver.run.steps[2].handed_over_to == 4 and driver.run.steps[4].state is StepState.SURGING
    second = model.instances[-1]
    assert second != first and second not in model.not_ready
    # the first replacement is step 3's to claim, and step 4's too: out of step 4's baseline
    assert (first not in driver.run.steps[4].surge_baseline) is fixed
    driver.invocation()
    assert driver.run.steps[3].surge_instance_id == second and driver.run.steps[3].state is StepState.DRAINING
    assert driver.run.steps[4].surge_instance_id is None and driver.run.steps[4].state is StepState.SURGING
    return model, driver, first, second


def test_each_successor_claims_its_own_replacement_and_the_run_succeeds() -> None:
    model, driver, first, second = _two_hand_overs()
    model.not_ready.discard(first)
    driver.invocation()
    assert driver.run.steps[4].surge_instance_id == first and driver.run.steps[4].state is StepState.DRAINING
    model.drains_run = False
    _done(model, 3)
    _done(model, 4)
    driver.finish()
    run = driver.run
    assert run.status is RunStatus.SUCCEEDED, run.reason
    assert [s.state for s in run.steps] == [StepState.DONE] * 6
    assert (run.steps[3].surge_instance_id, run.steps[4].surge_instance_id) == (second, first)
    spares = [s.surge_instance_id for s in run.steps]
    assert len(set(spares)) == len(spares)  # no instance claimed by two steps
    assert (model.desired, model.max_size, len(model.instances)) == (6, 6, 6) and run.groups[0].raised == 0
    assert not set(SIX) & set(model.instances)


def _stopped(driver: Driver, model: Slow) -> None:
    """A PodDisruptionBudget times step 3's drain out (its spare the second replacement) while step 4 waits for its
    spare (the first replacement, not Ready): the run pauses and gives both surges back. Then every drain ends at
    once and the first replacement is Ready."""
    model.commands["refresh-r1-3"].update(
        status="timed_out", started_at=driver.now.isoformat(), result={"message": "PodDisruptionBudget"}
    )
    model.drains_run = False
    model.not_ready.clear()
    driver.finish()


def test_a_run_stopped_with_both_successors_in_flight_gives_each_unit_back() -> None:
    model, driver, first, _second = _two_hand_overs()
    _stopped(driver, model)
    run = driver.run
    assert run.status is RunStatus.PAUSED, run.reason
    assert run.steps[4].state is StepState.UNDONE and run.steps[4].surge_instance_id == first
    assert not any(s.state is StepState.FAILED for s in run.steps)
    assert (model.desired, model.max_size, len(model.instances)) == (6, 6, 6) and run.groups[0].raised == 0
    assert run.groups[0].unreturned == 0


def test_with_the_whole_group_as_the_second_successor_s_baseline_a_stop_leaves_its_unit_raised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def as_before(_p: Context, step: RunStep, _to: RunStep, facts: GroupFacts) -> list[str]:
        return sorted(i.instance_id for i in facts.instances if i.instance_id != step.instance_id)

    monkeypatch.setattr(handover, "successor_baseline", as_before)
    model, driver, _first, _second = _two_hand_overs(fixed=False)
    _stopped(driver, model)
    run = driver.run
    assert run.status is RunStatus.FAILED and run.steps[4].state is StepState.FAILED
    assert "waiting for nodes-a.c to launch a spare to give back" in run.steps[4].note  # a launch that never comes
    assert run.groups[0].unreturned == 1 and (model.desired, model.max_size) == (7, 7)  # one above: 6/6 at the start
