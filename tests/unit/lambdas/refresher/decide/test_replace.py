"""A replacement run (trigger ``rebalance``, started by the interruption Lambda) in the refresher's decisions: its
drains say ``rebalance-replace`` (so a Spot warning tightens them), and a drain a Spot warning tightened that timed
out terminates the doomed instance instead of pausing. Pure."""

from __future__ import annotations

from core.runs import REBALANCE_TRIGGER, RunOptions, RunStatus, Selection, StepState
from lambdas.refresher.decide import advance
from lambdas.refresher.plan import SendCommand, TerminateInstance
from lambdas.refresher.world import World
from tests.unit.lambdas.refresher.decide_world import NODES, OLD, OTHER, SETTINGS, SPARE, T0, effects, run, world


def replacement(state: StepState, **step: object):
    r = run(state, 1, T0, **step)
    return r.model_copy(update={"options": RunOptions(trigger=REBALANCE_TRIGGER, selection=Selection.ALL)})


def test_a_replacement_runs_drain_says_rebalance_and_a_refreshs_does_not() -> None:
    w = world([OLD, OTHER, SPARE], 3)
    (drain,) = effects(advance(replacement(StepState.SURGING), w, SETTINGS, T0), SendCommand)
    assert drain.command.reason.startswith("rebalance-replace ") and drain.command.instance_id == OLD
    (plain,) = effects(advance(run(StepState.SURGING, 1, T0), w, SETTINGS, T0), SendCommand)
    assert plain.command.reason.startswith("refresh ")


def timed_out(tightened: bool) -> World:
    item: dict[str, object] = {
        "status": "timed_out",
        "result": {"message": "pdb"},
        "command": {"deadline": T0.isoformat()},
    }
    if tightened:
        item["deadline_tightened_to"] = T0.isoformat()
    base = world([OLD, OTHER, SPARE], 3)
    return World(groups=base.groups, nodes=base.nodes, commands={"refresh-r1-0": item})


def test_a_drain_a_spot_warning_tightened_that_timed_out_terminates_the_old_instance_and_keeps_the_spare() -> None:
    step = {"command_id": "refresh-r1-0", "surge_instance_id": SPARE}
    decision = advance(replacement(StepState.DRAINING, **step), timed_out(True), SETTINGS, T0)
    assert decision.run.status is RunStatus.RUNNING
    (terminate,) = effects(decision, TerminateInstance)
    assert (terminate.asg_name, terminate.instance_id, terminate.decrement) == (NODES, OLD, True)
    assert decision.run.steps[0].state is StepState.TERMINATING and decision.run.steps[0].drain_status == "timed_out"


def test_a_drain_that_timed_out_untightened_still_pauses_and_gives_the_spare_back() -> None:
    step = {"command_id": "refresh-r1-0", "surge_instance_id": SPARE}
    decision = advance(replacement(StepState.DRAINING, **step), timed_out(False), SETTINGS, T0)
    assert decision.run.status is RunStatus.PAUSING and not effects(decision, TerminateInstance)
    assert [a.command.kind.value for a in effects(decision, SendCommand)] == ["uncordon", "drain"]
