"""The executor reading back ``CMD#`` items of the agent partition (which more than this Lambda writes): an item of
any shape DynamoDB can hold is judged, never a reason to fail every delivery of the event (moto for the effects)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from core.lifecycle import LifecycleAction
from core.model import CommandStatus
from lambdas.interruption.decide import Plan
from lambdas.interruption.execute import execute
from lambdas.interruption.plan import AwaitDrain
from tests.unit.lambdas.interruption.effects_world import NOW, command, instance, messages


def _set_status(effects: Any, command_id: str, status: Any) -> None:
    effects.store.table.update_item(
        Key={"pk": effects.store.agent_pk, "sk": f"CMD#{command_id}"},
        UpdateExpression="SET #s = :s",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":s": status},
    )


def _await(effects: Any, status: Any) -> str:
    victim = instance(effects)
    effects.store.record_command(command(victim), 3600, now=NOW)
    _set_status(effects, "spot-ev", status)
    action = LifecycleAction(instance_id=victim, asg_name="nodes", hook_name="node-manager-drain", token="t-1")
    [result] = execute(Plan((AwaitDrain(action, "spot-ev"),)), effects, NOW)
    return str(result["result"])


@pytest.mark.parametrize("status", [["succeeded"], {"succeeded"}, {"value": "succeeded"}])
def test_awaiting_a_drain_whose_status_is_a_list_set_or_map_is_left_to_the_agent(effects, status):
    """A status DynamoDB holds as a list, a string set or a map reads back as a Python list, set or dict: unhashable,
    so a membership test against a set of statuses raised ``TypeError`` and failed every delivery of the lifecycle
    action, as the unknown string status did before it was judged no end."""
    assert _await(effects, status).startswith("left to the agent")


@pytest.mark.parametrize("status", [s for s in CommandStatus if s.terminal])
def test_every_terminal_status_ends_the_wait(effects, status):
    """Each status ``CommandStatus`` names terminal (succeeded, timed_out, failed, skipped) is a drain that ended:
    the executor finishes the lifecycle action itself (the agent may have looked for ``HOOK#`` before it existed)."""
    assert _await(effects, status.value).startswith(f"drain already {status.value}: ")


@pytest.mark.parametrize("status", [CommandStatus.QUEUED.value, CommandStatus.RUNNING.value])
def test_an_active_drain_is_left_to_the_agent(effects, status):
    assert _await(effects, status).startswith("left to the agent")


@pytest.mark.parametrize("tightened_to", ["2000-01-01T00:00:00", "0", "1999-12-31 soon"])
def test_a_tightening_refused_by_an_unreadable_earlier_deadline_still_gets_the_spot_drain(effects, tightened_to):
    """The tightening is refused when the item's ``deadline_tightened_to`` compares (as a string) before the one asked.
    One the agent cannot read (no zone, no time: the agent partition is written by more than this Lambda) binds the
    running drain to nothing (``agent.consumer.decisions``: absent), so it is no earlier deadline already set: the
    Spot warning's own drain is recorded and sent, as before the tightening was refused only for an ended drain."""
    from lambdas.interruption.plan import TightenCommand

    victim = instance(effects)
    running = command(victim).model_copy(update={"command_id": "rebalance-ev", "deadline": NOW + timedelta(hours=1)})
    effects.store.record_command(running, 3600, now=NOW)
    effects.store.start_command(running, "agent", stale_after_seconds=60, ttl_seconds=3600, now=NOW)
    effects.store.table.update_item(
        Key={"pk": effects.store.agent_pk, "sk": "CMD#rebalance-ev"},
        UpdateExpression="SET deadline_tightened_to = :d",
        ExpressionAttributeValues={":d": tightened_to},
    )
    spot = command(victim)
    [result] = execute(Plan((TightenCommand("rebalance-ev", spot.deadline, spot),)), effects, NOW)
    assert result["result"].startswith("no longer running"), result
    assert effects.store.get_command("spot-ev")["status"] == "queued" and len(messages(effects)) == 1
