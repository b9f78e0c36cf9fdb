"""A spare given back is terminated without a drain only when the membership says it has no node, and only a fresh
``MEMBERSHIP`` mark makes a missing record say that (``World.membership_confirmed``): while the mark is stale, a
record can be missing because it aged out, not because the node is gone (storm seed 60002, docs/SIMULATION.md
"Findings"). Then the spare is drained first: the agent finds its node itself, or answers that it has none. Plain
values in, plan out."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from core.model import CommandKind
from core.runs import StepState
from lambdas.refresher.decide import advance
from lambdas.refresher.plan import SendCommand, TerminateInstance
from tests.unit.lambdas.refresher.decide_world import OLD, OTHER, SETTINGS, SPARE, T0, effects, run, world

LATER = T0 + timedelta(seconds=60)


@pytest.mark.parametrize("confirmed", [True, False])
def test_a_spare_without_a_record_is_terminated_undrained_only_when_the_membership_is_confirmed(
    confirmed: bool,
) -> None:
    # the old node and the other are recorded; the spare's record is missing (aged out under a stale mark, or none)
    base = world([OLD, OTHER, SPARE], 3, ready=[OLD, OTHER])
    decision = advance(
        run(StepState.UNDOING, 1, T0, surge_instance_id=SPARE, note="drain timed_out: surge given back"),
        replace(base, membership_confirmed=confirmed),
        SETTINGS,
        LATER,
    )
    step = decision.run.steps[0]
    if confirmed:
        (terminate,) = effects(decision, TerminateInstance)
        assert (terminate.instance_id, terminate.decrement) == (SPARE, True)
        assert step.state is StepState.UNDO_TERMINATING
    else:
        assert not effects(decision, TerminateInstance)
        sent = [(s.command.kind, s.command.instance_id) for s in effects(decision, SendCommand)]
        assert sent == [(CommandKind.DRAIN, SPARE)]
        assert step.state is StepState.UNDO_DRAINING
