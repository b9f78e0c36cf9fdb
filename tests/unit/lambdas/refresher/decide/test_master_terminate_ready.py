"""A drained master is terminated only while every other master is Ready (invariant 2). Storm seed 188050: a master
step started with all three masters Ready and drained its node; another master went NotReady during the drain, and
the pass that read the drain's success terminated the drained master all the same, the control plane two members
short. Now the step waits under the ``nodes_ready`` deadline, then gives up (master kept and uncordoned, the run
paused). Pure."""

from __future__ import annotations

from datetime import timedelta

from core.model import CommandKind
from core.runs import Run, RunStatus, StepState
from lambdas.refresher.decide import advance
from lambdas.refresher.decide.context import WaitKind
from lambdas.refresher.plan import SendCommand, TerminateInstance
from tests.unit.lambdas.refresher.decide.lifecycle_model import M1, M2, OLD1, SETTINGS, T0, Model, iid, new_run

M3 = iid(0x203)


def drained(model: Model) -> Run:
    """The run's master step 0 drained M1 (all masters Ready at its start); the drain succeeded."""
    run = new_run(model, [OLD1], masters=(M1,))
    decision = advance(run, model.world(), SETTINGS, T0)
    model.apply(decision.actions, {})
    assert decision.run.steps[0].state is StepState.DRAINING
    return decision.run


def terminates(decision_actions: list[object]) -> list[str]:
    return [a.instance_id for a in decision_actions if isinstance(a, TerminateInstance)]


def test_a_drained_master_waits_while_another_master_is_not_ready() -> None:
    model = Model([OLD1], desired=1, max_size=2, masters=[M1, M2, M3])
    run = drained(model)
    model.not_ready.add(M2)  # during the drain
    decision = advance(run, model.world(), SETTINGS, T0 + timedelta(minutes=2))
    assert terminates(decision.actions) == []
    assert [w.kind for w in decision.waits] == [WaitKind.NODE_READY]
    assert decision.run.steps[0].state is StepState.DRAINING
    model.not_ready.discard(M2)  # Ready again: now it goes
    decision = advance(decision.run, model.world(), SETTINGS, T0 + timedelta(minutes=4))
    assert terminates(decision.actions) == [M1]
    assert decision.run.steps[0].state is StepState.TERMINATING


def test_its_own_node_not_ready_does_not_hold_it() -> None:
    model = Model([OLD1], desired=1, max_size=2, masters=[M1, M2, M3])
    run = drained(model)
    model.not_ready.add(M1)
    decision = advance(run, model.world(), SETTINGS, T0 + timedelta(minutes=2))
    assert terminates(decision.actions) == [M1]


def test_past_the_deadline_the_master_is_kept_and_uncordoned() -> None:
    model = Model([OLD1], desired=1, max_size=2, masters=[M1, M2, M3])
    run = drained(model)
    model.not_ready.add(M2)
    decision = advance(run, model.world(), SETTINGS, T0 + timedelta(minutes=2))
    later = T0 + timedelta(minutes=2, seconds=SETTINGS.nodes_ready_timeout_seconds + 60)
    decision = advance(decision.run, model.world(), SETTINGS, later)
    assert terminates(decision.actions) == []
    uncordons = [a for a in decision.actions if isinstance(a, SendCommand) and a.command.kind is CommandKind.UNCORDON]
    assert [a.command.instance_id for a in uncordons] == [M1]
    assert decision.run.status in (RunStatus.PAUSING, RunStatus.PAUSED)
    assert "nodes_ready deadline" in decision.run.reason
