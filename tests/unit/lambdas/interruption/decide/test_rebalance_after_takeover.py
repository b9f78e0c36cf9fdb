"""A rebalance recommendation after a Spot warning that took a drain over (rule 5b) instead of recording its own: the
warning's only trace is the taken-over drain's ``tightened_by`` and ``deadline_tightened_to``. Rule 5a acknowledges
such a recommendation ``already_interrupted`` until that deadline, as it does one after a warning's own drain. Pure."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from core.runs import StepState
from core.settings import RebalancePolicy
from lambdas.interruption.decide import decide
from lambdas.interruption.plan import IgnoreReason, RecordCommand, StartReplacement
from tests.unit.lambdas.interruption.decision_world import NOW, T0, active_run, rebalance, settings, world
from tests.unit.lambdas.interruption.decision_world import command_item as item

RUN_ID = "20240305T101000Z-abcdef"
SPOT_DEADLINE = T0 + timedelta(seconds=120)


def taken_over(command_id: str, reason: str, status: str, quiet: int | None) -> dict:
    """A drain a Spot warning ``spot-ev-1`` tightened (``adapters.dynamo.commands.tighten_deadline``) and resolved."""
    extra = {"deadline_tightened_to": SPOT_DEADLINE.isoformat(), "tightened_by": "spot-ev-1"}
    if quiet is not None:
        extra["resolution"] = "escalated by spot-ev-1"
    return item(command_id, "drain", status, quiet=quiet, reason=reason, **extra)


REBALANCE_DRAIN = ("rebalance-ev-2", "rebalance-recommendation", 1800)
REFRESH_DRAIN = (f"refresh-{RUN_ID}-0", f"refresh {RUN_ID} step 0", None)


def rebalance_drain_ended() -> dict:
    command_id, reason, quiet = REBALANCE_DRAIN
    return taken_over(command_id, reason, "succeeded", quiet)


@pytest.mark.parametrize("policy", [RebalancePolicy.CORDON, RebalancePolicy.DRAIN, RebalancePolicy.REPLACE])
@pytest.mark.parametrize("drain", [REBALANCE_DRAIN, REFRESH_DRAIN])
@pytest.mark.parametrize("status", ["succeeded", "failed", "timed_out"])
def test_a_recommendation_after_a_warning_that_took_a_drain_over_cordons_and_replaces_nothing(policy, drain, status):
    """The drain the warning tightened ended (an empty node drains in seconds) and the instance is going at the Spot
    deadline: a new recommendation (another event id; AWS may send it with the warning or after it) would cordon it
    for a quiet period, drain it again with the rebalance timeout, or start a run that launches a spare for it."""
    command_id, reason, quiet = drain
    w = replace(world(), commands=(taken_over(command_id, reason, status, quiet),), active_run=None)
    plan = decide(rebalance("ev-3"), NOW, settings(rebalance_policy=policy), w)
    assert not any(isinstance(a, StartReplacement | RecordCommand) for a in plan.actions), plan
    assert plan.acknowledged is not None and plan.acknowledged.reason is IgnoreReason.ALREADY_INTERRUPTED


def test_under_a_run_replacing_the_instance_no_fallback_cordon_is_recorded() -> None:
    """The refresh run replacing the instance is still active (its step terminating): under ``replace`` the
    recommendation was skipped ``already_replacing`` and fell back to a cordon with a quiet period."""
    run = active_run(trigger="schedule", steps=((world().instance.instance_id, StepState.TERMINATING),))
    w = replace(world(), commands=(taken_over(*REFRESH_DRAIN[:2], "succeeded", None),), active_run=run)
    plan = decide(rebalance("ev-3"), NOW, settings(rebalance_policy=RebalancePolicy.REPLACE), w)
    assert not any(isinstance(a, RecordCommand) for a in plan.actions), plan


def test_once_the_spot_deadline_passed_a_recommendation_is_decided_as_usual() -> None:
    """A drain tightened by a ``stop`` warning looks the same; that instance comes back, and a recommendation for it
    once the deadline passed (the instance running again) is its own: cordoned as usual."""
    w = replace(world(), commands=(rebalance_drain_ended(),), active_run=None)
    plan = decide(rebalance("ev-3"), SPOT_DEADLINE + timedelta(seconds=1), settings(), w)
    assert any(isinstance(a, RecordCommand) for a in plan.actions), plan


def test_a_drain_tightened_by_no_spot_warning_is_no_interruption() -> None:
    """Only a Spot warning's tightening counts (``tightened_by`` a ``spot-`` command id); an unreadable deadline is
    no tightening."""
    for extra in ({"tightened_by": "lifecycle-ev-9"}, {"deadline_tightened_to": "soon"}):
        drained = {**rebalance_drain_ended(), **extra}
        w = replace(world(), commands=(drained,), active_run=None)
        plan = decide(rebalance("ev-3"), NOW, settings(), w)
        assert any(isinstance(a, RecordCommand) for a in plan.actions), (extra, plan)
