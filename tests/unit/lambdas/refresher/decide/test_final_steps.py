"""A decision never changes a step that is final when its pass starts: ``Run.working_copy`` shares those steps with
the run the pass read (``core.runs``), so a rule that changed one would change the run as read too."""

from datetime import timedelta

import pytest

from bench.run_pass import SETTINGS, scenario
from core.runs import Run, RunStatus, StepState
from lambdas.refresher.decide import advance
from lambdas.refresher.decide.context import Context
from lambdas.refresher.world import World


def variants() -> list[tuple[str, Run, World, float]]:
    """A run of 30 steps (20 final, of every final state; one surging, its spare Ready; the rest pending) in several
    worlds and moments: each moves the steps in flight another way."""
    run, world = scenario(30)
    for k, state in enumerate((StepState.UNDONE, StepState.KEPT, StepState.SKIPPED, StepState.FAILED)):
        run.steps[k * 3] = run.steps[k * 3].model_copy(update={"state": state})
    gone = World(groups={}, nodes=world.nodes)
    not_ready = World(groups=world.groups, nodes={})
    return [
        ("drain", run, world, 5),
        ("cancel", run.model_copy(update={"cancel_requested": True}), world, 5),
        ("pausing", run.model_copy(update={"status": RunStatus.PAUSING}), world, 5),
        ("groups gone", run, gone, 5),
        ("spare not ready, deadline passed", run, not_ready, 86400),
    ]


@pytest.mark.parametrize("name", [v[0] for v in variants()])
def test_a_pass_leaves_the_final_steps_of_the_run_it_read_as_they_were(name: str) -> None:
    _, run, world, seconds = next(v for v in variants() if v[0] == name)
    before = run.model_copy(deep=True)
    final = [s for s in run.steps if s.state.final]
    decision = advance(run, world, SETTINGS, run.updated_at + timedelta(seconds=seconds))
    assert decision.changed  # the pass moved something
    assert run == before
    assert [s.model_fields_set for s in run.steps] == [s.model_fields_set for s in before.steps]
    kept = [s for s in decision.run.steps if any(s is f for f in final)]
    assert len(kept) == len(final)  # shared, unchanged


@pytest.mark.parametrize("name", [v[0] for v in variants()])
def test_a_pass_shares_the_pending_steps_it_leaves_pending_and_copies_those_it_moves(name: str) -> None:
    _, run, world, seconds = next(v for v in variants() if v[0] == name)
    pending = {s.index: s for s in run.steps if s.state is StepState.PENDING}
    decision = advance(run, world, SETTINGS, run.updated_at + timedelta(seconds=seconds))
    for step in decision.run.steps:
        if step.index in pending:
            # left pending: the step read, shared; moved (skipped, surging): the pass's own copy
            assert (step is pending[step.index]) == (step.state is StepState.PENDING), step.index


def test_own_copies_a_pending_step_once_in_its_place_and_refuses_a_final_or_foreign_one() -> None:
    run, world = scenario(30)
    p = Context(run, world, SETTINGS, run.updated_at)
    pending = next(s for s in p.run.steps if s.state is StepState.PENDING)
    place = p.run.steps.index(pending)
    mine = p.own(pending)
    assert mine is not pending and mine == pending and p.run.steps[place] is mine
    assert p.own(pending) is mine and p.own(mine) is mine  # once: the step read and the copy both name it
    in_flight = next(s for s in p.run.steps if s.state.in_flight)
    assert p.own(in_flight) is in_flight  # copied by ``Run.working_copy`` already
    with pytest.raises(ValueError, match="final"):
        p.own(next(s for s in p.run.steps if s.state.final))
    with pytest.raises(ValueError, match="not a step"):
        p.own(pending.model_copy(update={"index": 99}))
