"""``REBALANCE_POLICY=replace`` and rule 5d's cap together: the fallback cordon of a recommendation that is not
replaced is capped, whether the decision skipped the replacement or the executor found it refused (the lock held by
another operation, another run started by a recommendation decided at the same time); the cordon of an instance a
run replaces is the replacement's, never capped (decision pure, effects on moto's DynamoDB)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from adapters.dynamo.lock import LeaseLock
from adapters.dynamo.runs import RunStore
from core.runs import StepState
from core.settings import RebalancePolicy
from lambdas.interruption.decide import decide
from lambdas.interruption.execute import Effects, execute
from lambdas.interruption.plan import IgnoreReason, JoinReplacement, RecordCommand, StartReplacement
from tests.unit.lambdas.interruption.decision_world import (
    INSTANCE,
    NOW,
    OTHER,
    active_run,
    kinds,
    rebalance,
    settings,
    world,
)
from tests.unit.lambdas.interruption.effects_world import messages

REPLACE = settings(rebalance_policy=RebalancePolicy.REPLACE)


def loaded(cordons: int, nodes: int, **changes: Any) -> Any:
    return replace(world(), rebalance_cordons=cordons, cluster_nodes=nodes, **changes)


@pytest.mark.parametrize("trigger", ["schedule", "rebalance"])
def test_the_cordon_of_an_instance_a_run_already_replaces_is_not_capped(trigger: str) -> None:
    """A run replaces the instance (a refresh step, or the run an earlier delivery of this recommendation started
    before it crashed ahead of the cordon's record): ``already_replacing`` is not a replacement refused, and its
    cordon, which keeps pods off the node until the run drains it, is the replacement's, as a start's is."""
    run = active_run(trigger=trigger, steps=((INSTANCE, StepState.SURGING),))
    plan = decide(rebalance(), NOW, REPLACE, loaded(2, 10, active_run=run))
    assert kinds(plan) == ["Skip", "RecordCommand", "SendCommand"], plan


def test_a_start_refused_at_execution_past_the_cap_records_no_cordon(effects: Effects) -> None:
    """Decided with no run active (a start: not capped), refused when applied: the lock is held by another operation,
    or another recommendation of the same wave started its run first. Nothing replaces the instance, so its cordon is
    the cordon policy's fallback, and past the cap it is not recorded: a wave of recommendations decided before the
    first run was written otherwise cordoned every other node of the pool."""
    plan = decide(rebalance(), NOW, REPLACE, loaded(2, 10, active_run=None))
    assert isinstance(plan.actions[0], StartReplacement) and kinds(plan)[1:] == ["RecordCommand", "SendCommand"]
    LeaseLock(effects.store, clock=NOW.timestamp).acquire("replenisher", "replenish", 120)
    results = execute(plan, effects, NOW)
    assert results[0]["result"].startswith("not started"), results
    assert effects.store.get_command("rebalance-ev-2") is None and messages(effects) == []
    assert any(IgnoreReason.REBALANCE_CAPPED.value in r["result"] for r in results), results


def test_below_the_cap_a_refused_start_keeps_the_fallback_cordon(effects: Effects) -> None:
    plan = decide(rebalance(), NOW, REPLACE, loaded(1, 10, active_run=None))
    LeaseLock(effects.store, clock=NOW.timestamp).acquire("replenisher", "replenish", 120)
    execute(plan, effects, NOW)
    assert effects.store.get_command("rebalance-ev-2")["status"] == "queued" and len(messages(effects)) == 1


def test_past_the_cap_a_start_that_goes_ahead_or_was_made_by_an_earlier_delivery_keeps_its_cordon(
    effects: Effects,
) -> None:
    plan = decide(rebalance(), NOW, REPLACE, loaded(2, 10, active_run=None))
    execute(plan, effects, NOW)
    assert RunStore(effects.store).active() is not None
    assert effects.store.get_command("rebalance-ev-2")["status"] == "queued"
    effects.store.table.delete_item(Key={"pk": effects.store.agent_pk, "sk": "CMD#rebalance-ev-2"})
    # the same delivery again (it crashed before the cordon's record): its run is the active one, refused as started
    results = execute(plan, effects, NOW)
    assert "already" in results[0]["result"], results
    assert effects.store.get_command("rebalance-ev-2")["status"] == "queued"
    assert any(isinstance(a, RecordCommand) for a in plan.actions)


def test_a_join_past_the_cap_carries_its_cordon_and_one_below_it_carries_none() -> None:
    run = active_run(steps=((OTHER, StepState.SURGING),))
    limit_two = settings(rebalance_policy=RebalancePolicy.REPLACE, rebalance_replace_limit=2)
    [join, *_] = decide(rebalance(), NOW, limit_two, loaded(2, 10, active_run=run)).actions
    assert isinstance(join, JoinReplacement) and join.capped_cordon == "rebalance-ev-2"
    [join, *_] = decide(rebalance(), NOW, limit_two, loaded(1, 10, active_run=run)).actions
    assert isinstance(join, JoinReplacement) and join.capped_cordon is None
