"""The releaser loop (``agent.cordons.releaser``) on moto's DynamoDB, with a node held in memory and the real
release decision (``agent.drain.cordon.decide_release``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from agent.cordons.releaser import CordonReleaser
from core.model import Command, CommandStatus, DrainOptions, utcnow
from tests.dynamo_reads import answered_sort_keys
from tests.unit.agent.consumer_world import CLUSTER, INSTANCE, World
from tests.unit.agent.cordons.one_node import OneNode


def cordoned(
    world: World,
    command_id: str = "rebalance-1",
    quiet: int = 300,
    ours: bool = True,
    kind: str = "cordon",
    status: CommandStatus = CommandStatus.SUCCEEDED,
    result: dict[str, Any] | None = None,
) -> Command:
    """A rebalance cordon (or drain: ``kind``) recorded, run and finished as the agent leaves it (``status``, and
    ``result`` when given instead of the engine's cordon fields)."""
    cmd = Command(
        command_id=command_id,
        cluster=CLUSTER,
        kind=kind,
        instance_id=INSTANCE,
        reason="rebalance-recommendation",
        deadline=utcnow() + timedelta(seconds=600),
        options=DrainOptions(uncordon_after_seconds=quiet),
    )
    world.store.record_command(cmd, ttl_seconds=3600)
    attempt = world.store.start_command(cmd, "agent-a:1", stale_after_seconds=60, ttl_seconds=3600)
    if result is None:
        result = {"status": status.value, "node_name": "n1", "cordoned_by_us": ours, "cordoned_by_other": not ours}
    world.store.finish_command(command_id, "agent-a:1", attempt, status, result)
    return cmd


def releaser(world: World, node: OneNode, after: float) -> CordonReleaser:
    return CordonReleaser(world.store, node, 60, clock=lambda: utcnow() + timedelta(seconds=after))


def resolution(world: World, command_id: str = "rebalance-1") -> Any:
    item = world.store.get_command(command_id)
    assert item is not None
    return item.get("resolution")


def test_our_quiet_cordon_is_given_back_after_its_period_and_only_once(world: World) -> None:
    cordoned(world)
    node = OneNode(unschedulable=True, holder="rebalance-1")
    assert releaser(world, node, after=100).check_once()["waiting"] == 1
    assert node.unschedulable and resolution(world) is None
    assert releaser(world, node, after=400).check_once()["released"] == 1
    assert not node.unschedulable and node.holder is None and resolution(world) == "released"
    assert releaser(world, node, after=500).check_once() == {"released": 0, "kept": 0, "waiting": 0, "errors": 0}
    assert node.patches == 1


def test_a_cordon_someone_else_made_is_never_given_back(world: World) -> None:
    cordoned(world, ours=False)  # the node was already cordoned by an operator when the command ran
    node = OneNode(unschedulable=True, holder=None)
    assert releaser(world, node, after=400).check_once()["kept"] == 1
    assert node.unschedulable and node.patches == 0
    assert "not cordoned by this command" in resolution(world)


# the consumer's own result of a drain whose deadline passed before it started (its fast step cordoned the node)
LATE = {"status": "timed_out", "node_name": "n1", "message": "deadline passed before the drain started"}


@pytest.mark.parametrize(
    ("status", "result"),
    [(CommandStatus.FAILED, None), (CommandStatus.TIMED_OUT, LATE)],
    ids=["failed after its cordon", "deadline passed before it started"],
)
def test_a_rebalance_drain_that_did_not_succeed_gives_its_cordon_back(
    world: World, status: CommandStatus, result: dict[str, Any] | None
) -> None:
    cordoned(world, kind="drain", status=status, result=result)
    node = OneNode(unschedulable=True, holder="rebalance-1")
    assert releaser(world, node, after=100).check_once()["waiting"] == 1
    assert releaser(world, node, after=400).check_once()["released"] == 1
    assert not node.unschedulable and node.holder is None and resolution(world) == "released"


@pytest.mark.parametrize(
    ("holder", "ending"),
    [("spot-1", "spot-1"), ("rebalance-1", "rebalance-1")],
    ids=["a Spot drain took it over", "a Spot warning tightened the drain"],
)
def test_a_failed_rebalance_drain_whose_instance_is_ending_keeps_its_cordon(
    world: World, holder: str, ending: str
) -> None:
    cordoned(world, kind="drain", status=CommandStatus.FAILED)
    node = OneNode(unschedulable=True, holder=holder, ending=ending)
    assert releaser(world, node, after=400).check_once()["kept"] == 1
    assert node.unschedulable and node.holder == holder and node.patches == 0
    assert "left" in resolution(world)


def test_a_cordon_a_later_command_took_over_is_left(world: World) -> None:
    cordoned(world)
    node = OneNode(unschedulable=True, holder="spot-1")  # a Spot drain re-stamped it (no CMD# seen: a race)
    assert releaser(world, node, after=400).check_once()["kept"] == 1
    assert node.unschedulable and node.holder == "spot-1" and "cordoned by command spot-1" in resolution(world)


@pytest.mark.parametrize("indexed", [False, True], ids=["range", "pointers"])
def test_a_later_command_for_the_instance_keeps_the_cordon(world: World, indexed: bool) -> None:
    """Read from the week's CMD# range (the index not complete yet) or through the instance's pointers."""
    if indexed:
        index_complete_now(world)
    cordoned(world)
    spot = Command(
        command_id="spot-1",
        cluster=CLUSTER,
        kind="drain",
        instance_id=INSTANCE,
        deadline=utcnow() + timedelta(seconds=120),
    )
    world.store.record_command(spot, ttl_seconds=3600, now=utcnow() + timedelta(seconds=1))
    node = OneNode(unschedulable=True, holder="rebalance-1")
    assert releaser(world, node, after=400).check_once()["kept"] == 1
    assert node.unschedulable and resolution(world).startswith("superseded by spot-1")


def test_a_cordon_the_lambda_resolved_first_is_not_touched(world: World) -> None:
    from adapters.dynamo.commands import resolve_cordon

    cordoned(world)
    assert resolve_cordon(world.store, "rebalance-1", "escalated by spot-1")
    node = OneNode(unschedulable=True, holder="rebalance-1")
    assert releaser(world, node, after=400).check_once()["released"] == 0
    assert node.unschedulable and resolution(world) == "escalated by spot-1"


def test_a_claim_left_by_a_stopped_agent_is_finished_by_the_next_check(world: World) -> None:
    from adapters.dynamo.commands import resolve_cordon

    cordoned(world)
    assert resolve_cordon(world.store, "rebalance-1", "releasing", over="releasing")  # the agent died here
    node = OneNode(unschedulable=True, holder="rebalance-1")
    assert releaser(world, node, after=400).check_once()["released"] == 1
    assert not node.unschedulable and resolution(world) == "released"


def test_a_node_that_is_gone_ends_the_cordon_without_a_patch(world: World) -> None:
    cordoned(world)
    node = OneNode(unschedulable=True, holder="rebalance-1")
    node.gone = True
    assert releaser(world, node, after=400).check_once()["kept"] == 1
    assert resolution(world) == "the node is gone" and node.patches == 0


def test_a_lifecycle_action_recorded_after_the_cordon_keeps_it(world: World) -> None:
    from adapters.dynamo.hooks import record_hook
    from core.lifecycle import LifecycleAction

    cordoned(world)
    action = LifecycleAction(instance_id=INSTANCE, asg_name="nodes", hook_name="node-manager-drain", token="t-1")
    assert record_hook(world.store, action, ttl_seconds=3600, now=utcnow() + timedelta(seconds=1))
    node = OneNode(unschedulable=True, holder="rebalance-1")
    assert releaser(world, node, after=400).check_once()["kept"] == 1
    assert node.unschedulable and "lifecycle action" in resolution(world)


def test_with_no_cordon_pending_only_the_rebalance_commands_are_read(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    cordoned(world)
    node = OneNode(unschedulable=True, holder="rebalance-1")
    assert releaser(world, node, after=400).check_once()["released"] == 1  # resolved: nothing pending any more
    for n in range(3):  # a week of other commands
        world.store.put(f"CMD#refresh-run-{n}", {"status": "succeeded", "instance_id": INSTANCE, "kind": "drain"})
    answered = answered_sort_keys(monkeypatch, world.store.table)
    assert releaser(world, node, after=500).check_once() == {"released": 0, "kept": 0, "waiting": 0, "errors": 0}
    assert answered == ["CMD#rebalance-1"]


def index_complete_now(world: World) -> None:
    """The command index's mark as a week after the upgrade leaves it: complete (``command_index``)."""
    from adapters.dynamo.command_index import MARK_SK

    world.store.put(MARK_SK, {"since": "2026-11-01T00:00:00+00:00", "complete_at": 0})


def test_with_the_index_complete_a_pending_cordon_reads_its_instance_s_commands_not_the_week_s(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    index_complete_now(world)
    cordoned(world)
    for n in range(3):  # a week of other instances' commands (no pointers of this instance)
        world.store.put(f"CMD#refresh-run-{n}", {"status": "succeeded", "instance_id": "i-0other", "kind": "drain"})
    node = OneNode(unschedulable=True, holder="rebalance-1")
    answered = answered_sort_keys(monkeypatch, world.store.table)
    assert releaser(world, node, after=100).check_once()["waiting"] == 1
    assert answered and not [sk for sk in answered if sk.startswith("CMD#refresh-run-")]
    assert releaser(world, node, after=400).check_once()["released"] == 1
    assert not node.unschedulable and resolution(world) == "released"


def test_more_pending_instances_than_pointer_reads_are_worth_read_the_range_once(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent.cordons import releaser as module

    index_complete_now(world)
    monkeypatch.setattr(module, "INDEXED_INSTANCES_MAX", 0)
    cordoned(world)
    world.store.put("CMD#refresh-run-0", {"status": "succeeded", "instance_id": "i-0other", "kind": "drain"})
    node = OneNode(unschedulable=True, holder="rebalance-1")
    answered = answered_sort_keys(monkeypatch, world.store.table)
    assert releaser(world, node, after=400).check_once()["released"] == 1
    assert "CMD#refresh-run-0" in answered  # the whole CMD# range, once


@pytest.mark.parametrize(
    ("sk", "junk"),
    [
        ("CMD#rebalance-junk", {"command": "not a map"}),
        ("CMD#rebalance-junk", {"command": {"options": {"uncordon_after_seconds": "soon"}}}),
        ("CMD#drain-junk", {"command": "not a map", "result": "not a map"}),
    ],
)
def test_an_unreadable_item_leaves_every_other_cordon_to_its_judgement(
    world: World, sk: str, junk: dict[str, Any]
) -> None:
    cordoned(world)
    world.store.put(sk, {"status": "succeeded", "instance_id": INSTANCE, **junk})
    node = OneNode(unschedulable=True, holder="rebalance-1")
    assert releaser(world, node, after=400).check_once()["released"] == 1
    assert not node.unschedulable and resolution(world) == "released"


def test_a_pending_item_that_names_no_instance_is_counted_and_the_loop_goes_on(world: World) -> None:
    import threading

    cordoned(world)
    odd = {"command_id": "rebalance-odd", "options": {"uncordon_after_seconds": 0}}
    world.store.put("CMD#rebalance-odd", {"status": "succeeded", "instance_id": {"not": "a string"}, "command": odd})
    node = OneNode(unschedulable=True, holder="rebalance-1")
    assert releaser(world, node, after=400).check_once() == {"released": 1, "kept": 0, "waiting": 0, "errors": 1}
    stop = threading.Event()

    def a_defect() -> dict[str, int]:
        stop.set()
        raise RuntimeError("a defect in one check")

    looped = releaser(world, node, after=400)
    looped.check_once = a_defect  # type: ignore[method-assign]
    looped.run(stop)  # returns: the loop outlives it


def test_a_quiet_period_is_refused_on_any_other_command() -> None:
    # the check reads only CMD#rebalance-*: a quiet period elsewhere would never be given back, so none is made
    with pytest.raises(ValidationError, match="quiet period"):
        Command(
            command_id="spot-1",
            cluster=CLUSTER,
            kind="cordon",
            instance_id=INSTANCE,
            deadline=utcnow() + timedelta(seconds=600),
            options=DrainOptions(uncordon_after_seconds=60),
        )


def test_a_rebalance_drain_left_running_past_its_deadline_by_a_dead_worker_gives_its_cordon_back(
    world: World,
) -> None:
    # the worker cordoned the node and died; its message was dead-lettered (a crash loop spends the queue's
    # receives), and the sweeper sends no message for a running command past its deadline: the item would stay
    # ``running`` for good, never judged, the node cordoned while its instance lives on (invariants 6 and 8)
    cmd = Command(
        command_id="rebalance-1",
        cluster=CLUSTER,
        kind="drain",
        instance_id=INSTANCE,
        reason="rebalance-recommendation",
        deadline=utcnow() + timedelta(seconds=600),
        options=DrainOptions(uncordon_after_seconds=300),
    )
    world.store.record_command(cmd, ttl_seconds=3600)
    world.store.start_command(cmd, "agent-dead:9", stale_after_seconds=60, ttl_seconds=3600)
    node = OneNode(unschedulable=True, holder="rebalance-1")
    assert releaser(world, node, after=300).check_once()["released"] == 0  # its worker may still be at it
    assert world.item("rebalance-1")["status"] == "running"
    releaser(world, node, after=700).check_once()  # past its deadline, its heartbeat long stale: ended
    item = world.item("rebalance-1")
    assert item["status"] == "timed_out" and "abandoned" in item["result"]["message"]
    assert node.unschedulable  # the quiet period counts from its worker's last heartbeat
    assert releaser(world, node, after=701).check_once()["released"] == 1
    assert not node.unschedulable and node.holder is None and resolution(world) == "released"
