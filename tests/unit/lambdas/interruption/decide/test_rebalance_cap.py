"""Rule 5d: at most ``REBALANCE_MAX_CORDONED_PERCENT`` of the cluster's nodes cordoned for rebalance recommendations
(``decide.rebalance.rebalance_capped``, pure), and what the Lambda reads for it (``gather.read_rebalance_load``,
against moto's DynamoDB)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from core.model import CommandKind
from core.runs import StepState
from core.settings import RebalancePolicy
from lambdas.interruption.decide import decide
from lambdas.interruption.execute import Effects
from lambdas.interruption.gather import read_rebalance_load
from lambdas.interruption.plan import IgnoreReason, RecordCommand, Skip, SkipReason
from tests.unit.lambdas.interruption.decision_world import (
    INSTANCE,
    NOW,
    OTHER,
    T0,
    active_run,
    kinds,
    rebalance,
    recorded,
    settings,
    spot,
    world,
)
from tests.unit.lambdas.interruption.effects_world import record_cordon


def loaded(cordons: int, nodes: int | None) -> Any:
    return replace(world(), rebalance_cordons=cordons, cluster_nodes=nodes)


@pytest.mark.parametrize("policy", [RebalancePolicy.CORDON, RebalancePolicy.DRAIN])
def test_a_recommendation_past_the_cap_is_acknowledged_not_cordoned(policy: RebalancePolicy) -> None:
    # 10 nodes, 20 %: at most 2 cordoned for rebalance; 2 already are
    plan = decide(rebalance(), NOW, settings(rebalance_policy=policy), loaded(2, 10))
    ack = plan.acknowledged
    assert ack is not None and ack.reason is IgnoreReason.REBALANCE_CAPPED and kinds(plan) == ["Acknowledge"]
    assert "2 of 10 nodes" in ack.detail and "at most 2" in ack.detail


def test_below_the_cap_unknown_size_or_a_higher_share_the_node_is_cordoned() -> None:
    for w, s in (
        (loaded(1, 10), settings()),
        (loaded(50, None), settings()),  # no membership count: no cap
        (loaded(2, 10), settings(rebalance_max_cordoned_percent=30)),
        (loaded(0, 3), settings()),  # a small cluster: at least one node
    ):
        plan = decide(rebalance(), NOW, s, w)
        assert kinds(plan) == ["RecordCommand", "SendCommand"], (w, plan)
    assert decide(rebalance(), NOW, settings(), loaded(1, 3)).acknowledged is not None  # its one is taken


def test_the_cap_leaves_spot_warnings_replacements_and_redeliveries_alone() -> None:
    warned = decide(spot(), NOW, settings(), loaded(9, 10))
    assert isinstance(warned.actions[0], RecordCommand) and warned.actions[0].command.kind is CommandKind.DRAIN
    replace_policy = settings(rebalance_policy=RebalancePolicy.REPLACE)
    assert decide(rebalance(), NOW, replace_policy, loaded(9, 10)).acknowledged is None  # REBALANCE_REPLACE_LIMIT's
    first = decide(rebalance(), NOW, settings(), loaded(0, 10)).actions[0]
    assert isinstance(first, RecordCommand)
    # its own delivery again (rule 6): the queued command is re-sent whatever the cap says now
    again = decide(rebalance(), NOW, settings(), replace(loaded(9, 10), command=recorded(first.command, "queued")))
    assert again.acknowledged is None and "SendCommand" in kinds(again)


def test_the_load_read_counts_other_instances_cordons_in_effect_and_the_membership_count(effects: Effects) -> None:
    assert read_rebalance_load(effects.store, INSTANCE) == (0, None)  # nothing recorded, no mark
    record_cordon(effects, "rebalance-a", "i-0000000000000000a", "succeeded")  # holds its cordon
    record_cordon(effects, "rebalance-b", "i-0000000000000000b", "queued")
    record_cordon(effects, "rebalance-c", "i-0000000000000000c", "succeeded", resolution="released")  # given back
    record_cordon(effects, "rebalance-d", "i-0000000000000000d", "skipped")  # no node: holds nothing
    record_cordon(effects, "rebalance-own", INSTANCE, "succeeded")  # this instance's own (rule 5a's business)
    effects.store.put_membership_mark(T0, 40, ttl_seconds=3600)
    assert read_rebalance_load(effects.store, INSTANCE) == (2, 40)


@pytest.mark.parametrize(
    ("run", "reason"),
    [
        (active_run(steps=((OTHER, StepState.SURGING),)), SkipReason.REPLACE_LIMIT),  # REBALANCE_REPLACE_LIMIT=1
        (active_run(trigger="schedule"), SkipReason.RUN_ACTIVE),
    ],
)
def test_under_replace_a_fallback_cordon_past_the_cap_is_not_recorded(run: Any, reason: SkipReason) -> None:
    """A recommendation ``replace`` cannot replace (a run at its limit, another run active) falls back to the
    ``cordon`` policy's cordon, and so to its cap: AWS recommends a whole pool at once, and with one instance replaced
    at a time every other recommendation of the wave was cordoned for the quiet period, uncapped (29 of 30 nodes),
    where ``cordon`` holds 20 %. A recommendation the run takes is not capped: its cordon is the replacement's."""
    replace_policy = settings(rebalance_policy=RebalancePolicy.REPLACE)
    plan = decide(rebalance(), NOW, replace_policy, replace(loaded(2, 10), active_run=run))
    assert not any(isinstance(a, RecordCommand) for a in plan.actions), plan
    assert [a.reason for a in plan.actions if isinstance(a, Skip)] == [reason]
    assert plan.acknowledged is not None and plan.acknowledged.reason is IgnoreReason.REBALANCE_CAPPED
    below = decide(rebalance(), NOW, replace_policy, replace(loaded(1, 10), active_run=run))
    assert kinds(below) == ["Skip", "RecordCommand", "SendCommand"]
