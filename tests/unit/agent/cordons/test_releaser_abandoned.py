"""The releaser's end of a give-back command its worker left ``running`` (``agent.cordons.releaser``,
``decisions.abandoned``): on moto's DynamoDB, with a node held in memory and the real release decision."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest

from adapters.dynamo.commands import tighten_deadline
from agent.cordons.releaser import CordonReleaser
from core.exceptions import StoreUnavailableError
from core.model import Command, CommandStatus, DrainOptions, utcnow
from tests.unit.agent.consumer_world import CLUSTER, INSTANCE, World
from tests.unit.agent.cordons.one_node import OneNode


def rebalance(world: World, command_id: str, instance_id: str = INSTANCE, kind: str = "drain") -> Command:
    cmd = Command(
        command_id=command_id,
        cluster=CLUSTER,
        kind=kind,
        instance_id=instance_id,
        reason="rebalance-recommendation",
        deadline=utcnow() + timedelta(seconds=600),
        options=DrainOptions(uncordon_after_seconds=300),
    )
    world.store.record_command(cmd, ttl_seconds=3600)
    return cmd


def releaser(world: World, node: OneNode, after: float) -> CordonReleaser:
    return CordonReleaser(world.store, node, 60, clock=lambda: utcnow() + timedelta(seconds=after))


def test_an_abandoned_command_the_table_refuses_to_end_holds_no_other_cordon_back(world: World) -> None:
    # one instance's rebalance cordon ended and is due; another instance's drain was left running by a dead worker,
    # and DynamoDB throttles its end (or refuses it for good: an item it cannot grow): that item waits for the next
    # check, every other cordon is judged as usual (an error is counted per item, never for the whole check)
    done = rebalance(world, "rebalance-1", kind="cordon")
    attempt = world.store.start_command(done, "agent-a:1", stale_after_seconds=60, ttl_seconds=3600)
    result = {"status": "succeeded", "node_name": "n1", "cordoned_by_us": True, "cordoned_by_other": False}
    world.store.finish_command("rebalance-1", "agent-a:1", attempt, CommandStatus.SUCCEEDED, result)
    left = rebalance(world, "rebalance-2", instance_id="i-0fffffffffffffff0")
    world.store.start_command(left, "agent-dead:9", stale_after_seconds=60, ttl_seconds=3600)
    update = world.store.update

    def throttled(sk: str, *args: Any, **kwargs: Any) -> Any:
        if sk == "CMD#rebalance-2":
            raise StoreUnavailableError("throttled")
        return update(sk, *args, **kwargs)

    world.store.update = throttled  # type: ignore[method-assign]
    node = OneNode(unschedulable=True, holder="rebalance-1")
    counts = releaser(world, node, after=700).check_once()
    assert counts["released"] == 1 and counts["errors"] == 1
    assert not node.unschedulable and world.item("rebalance-1")["resolution"] == "released"
    assert world.item("rebalance-2")["status"] == "running"  # tried again at the next check


def test_an_abandoned_drain_a_spot_warning_tightened_keeps_its_cordon(world: World) -> None:
    # the worker cordoned the node and died before a heartbeat could mark it instance-ending; a Spot warning then
    # tightened the drain (one drain, not two: no command of its own), and the Lambda's resolution of the cordon
    # was lost (throttled, its retries spent). The instance ends at that deadline: a drain so tightened never gives
    # its cordon back, so ending it for its dead worker must not uncordon the node in the instance's last minutes
    cmd = rebalance(world, "rebalance-1")
    world.store.start_command(cmd, "agent-dead:9", stale_after_seconds=60, ttl_seconds=3600)
    spot = utcnow() + timedelta(seconds=200)
    assert tighten_deadline(world.store, "rebalance-1", spot, "spot-1")
    node = OneNode(unschedulable=True, holder="rebalance-1")
    releaser(world, node, after=300).check_once()  # past the Spot deadline, its worker long gone: ended
    assert world.item("rebalance-1")["status"] == "timed_out"
    releaser(world, node, after=900).check_once()
    assert node.unschedulable and node.patches == 0
    assert world.item("rebalance-1").get("resolution") not in (None, "released")


def forged(deadline: str, **fields: Any) -> dict[str, Any]:
    options = {"uncordon_after_seconds": 0}
    command = {"command_id": "rebalance-odd", "deadline": deadline, "options": options}
    return {"status": "running", "instance_id": "i-0fffffffffffffff0", "command": command, **fields}


@pytest.mark.parametrize(
    "fields",
    [
        {"heartbeat_at": 1},  # no attempt
        {"heartbeat_at": "1", "attempt": 1},  # no number
        {"heartbeat_at": Decimal("1e30"), "attempt": 1},  # no clock reads it
        {"heartbeat_at": Decimal("-1e30"), "attempt": 1},
        {"heartbeat_at": 1, "attempt": 1, "stale_after_seconds": Decimal("1e100")},
        {"heartbeat_at": 1, "attempt": "one", "worker": {"not": "a name"}},
    ],
)
def test_a_forged_running_item_neither_breaks_the_check_nor_holds_another_cordon_back(
    world: World, fields: dict[str, Any]
) -> None:
    done = rebalance(world, "rebalance-1", kind="cordon")
    attempt = world.store.start_command(done, "agent-a:1", stale_after_seconds=60, ttl_seconds=3600)
    result = {"status": "succeeded", "node_name": "n1", "cordoned_by_us": True, "cordoned_by_other": False}
    world.store.finish_command("rebalance-1", "agent-a:1", attempt, CommandStatus.SUCCEEDED, result)
    world.store.put("CMD#rebalance-odd", forged((utcnow() - timedelta(days=1)).isoformat(), **fields))
    node = OneNode(unschedulable=True, holder="rebalance-1")
    counts = releaser(world, node, after=700).check_once()
    assert counts["released"] == 1 and not node.unschedulable
    assert counts["errors"] == 0
