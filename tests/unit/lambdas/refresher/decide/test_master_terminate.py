"""A drained master is terminated only while every other master is Ready (invariant 2): a master that went NotReady
during the drain holds the termination, up to the step's ``nodes_ready`` deadline, past which the run pauses and the
drained master is kept (storm seed 185279: the refresher terminated a master 5 minutes after another went NotReady,
having asked only at the drain's start). Pure."""

from __future__ import annotations

from datetime import timedelta

from core.runs import Run, RunStatus, StepState
from lambdas.refresher.bounds import capacity_bounds
from lambdas.refresher.decide import advance
from lambdas.refresher.plan import SendCommand, TerminateInstance
from tests.unit.lambdas.refresher.decide.lifecycle_model import M1, M2, OLD1, SETTINGS, T0, Model, new_run


def drained_master() -> tuple[Model, Run]:
    """M1's step drained (the agent said succeeded), then M2 went NotReady."""
    model = Model([OLD1], desired=1, max_size=2, masters=[M1, M2])
    started = advance(new_run(model, [OLD1], masters=(M1, M2)), model.world(), SETTINGS, T0)
    model.apply(started.actions, capacity_bounds(started.run, model.world(), SETTINGS))
    assert started.run.steps[0].state is StepState.DRAINING
    model.not_ready.add(M2)
    return model, started.run


def test_a_master_not_ready_after_the_drain_started_holds_the_termination() -> None:
    model, run = drained_master()
    decision = advance(run, model.world(), SETTINGS, T0 + timedelta(seconds=300))
    assert not [a for a in decision.actions if isinstance(a, TerminateInstance)]
    assert decision.run.steps[0].state is StepState.DRAINING and "nodes_ready" in decision.run.steps[0].waiting_since
    model.not_ready.discard(M2)  # back: the termination goes ahead
    later = advance(decision.run, model.world(), SETTINGS, T0 + timedelta(seconds=400))
    (terminate,) = [a for a in later.actions if isinstance(a, TerminateInstance)]
    assert terminate.instance_id == M1 and not later.run.steps[0].waiting_since


def test_past_the_nodes_ready_deadline_the_run_pauses_and_the_drained_master_is_kept() -> None:
    model, run = drained_master()
    now = T0 + timedelta(seconds=300)
    first = advance(run, model.world(), SETTINGS, now)
    late = now + timedelta(seconds=SETTINGS.nodes_ready_timeout_seconds + 1)
    decision = advance(first.run, model.world(), SETTINGS, late)
    assert decision.run.status is RunStatus.PAUSED and "nodes_ready deadline" in decision.run.reason
    assert decision.run.steps[0].state is StepState.KEPT
    assert not [a for a in decision.actions if isinstance(a, TerminateInstance)]
    (uncordon,) = [a for a in decision.actions if isinstance(a, SendCommand)]
    assert uncordon.command.kind.value == "uncordon" and uncordon.command.instance_id == M1


def test_a_terminate_asked_again_waits_for_a_master_that_went_not_ready_since() -> None:
    """The terminate was asked with every master Ready and refused (Auto Scaling's ``ScalingActivityInProgress``),
    then another master went NotReady: the step, ``terminating``, asks again only once every other master is Ready
    (storm seed 189175: the retries terminated the drained master 168 s into the other's NotReady)."""
    model, run = drained_master()
    model.not_ready.discard(M2)
    asked = advance(run, model.world(), SETTINGS, T0 + timedelta(seconds=300))
    assert [a.instance_id for a in asked.actions if isinstance(a, TerminateInstance)] == [M1]
    refused = [a for a in asked.actions if not isinstance(a, TerminateInstance)]
    model.apply(refused, capacity_bounds(asked.run, model.world(), SETTINGS))
    assert asked.run.steps[0].state is StepState.TERMINATING
    model.not_ready.add(M2)
    held = advance(asked.run, model.world(), SETTINGS, T0 + timedelta(seconds=400))
    assert not [a for a in held.actions if isinstance(a, TerminateInstance)]
    assert held.run.steps[0].state is StepState.TERMINATING and "nodes_ready" in held.run.steps[0].waiting_since
    model.not_ready.discard(M2)
    again = advance(held.run, model.world(), SETTINGS, T0 + timedelta(seconds=500))
    assert [a.instance_id for a in again.actions if isinstance(a, TerminateInstance)] == [M1]
