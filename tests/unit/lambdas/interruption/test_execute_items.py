"""The executor reading back ``CMD#`` items of the agent partition (which more than this Lambda writes): an item of
any shape DynamoDB can hold is judged, never a reason to fail every delivery of the event (moto for the effects)."""

from __future__ import annotations

from typing import Any

import pytest

from core.lifecycle import LifecycleAction
from core.model import CommandStatus
from lambdas.interruption.decide import Plan
from lambdas.interruption.execute import execute
from lambdas.interruption.plan import AwaitDrain
from tests.unit.lambdas.interruption.effects_world import NOW, command, instance


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
