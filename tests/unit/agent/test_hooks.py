"""The agent completes termination lifecycle actions when a drain of the instance ends, and records heartbeats
while it runs. CompleteLifecycleAction and RecordLifecycleActionHeartbeat are not in moto: they are checked with
botocore's Stubber (the calls' exact parameters); SQS, DynamoDB and EventBridge are moto, as in the consumer's tests."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from adapters.aws.autoscaling import AutoScaling
from adapters.dynamo.hooks import get_hook, record_hook
from agent.hooks import HookFinisher
from agent.metrics import AgentMetrics
from core.exceptions import NodeNotFoundError
from core.lifecycle import HookState
from core.model import Command, CommandStatus
from tests.unit.agent.consumer_world import INSTANCE, ScriptedEngine, World, command, succeed
from tests.unit.agent.hook_world import HOOK, HOOK_PARAMS, consumer

NO_ACTION = "No active Lifecycle Action found with token " + HOOK.token


@pytest.fixture
def stubbed() -> Iterator[tuple[Any, Stubber]]:
    autoscaling = boto3.client("autoscaling", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(autoscaling) as stub:
        yield autoscaling, stub
        stub.assert_no_pending_responses()


def timed_out(cmd: Command) -> Any:
    return succeed(cmd).model_copy(update={"status": CommandStatus.TIMED_OUT, "message": "PDB blocked"})


def expect_complete(stub: Stubber) -> None:
    stub.add_response("complete_lifecycle_action", {}, {**HOOK_PARAMS, "LifecycleActionResult": "CONTINUE"})


def test_a_finished_drain_completes_the_pending_action_with_continue(
    world: World, stubbed: tuple[Any, Stubber]
) -> None:
    autoscaling, stub = stubbed
    assert record_hook(world.store, HOOK, ttl_seconds=3600)
    assert not record_hook(world.store, HOOK, ttl_seconds=3600)  # the same action again: a duplicate
    expect_complete(stub)
    metrics = AgentMetrics()
    world.send(command("lifecycle-ev-1"))
    consumer(world, ScriptedEngine(), autoscaling, metrics).handle(world.receive())
    assert world.item("lifecycle-ev-1")["status"] == "succeeded"
    hook = get_hook(world.store, INSTANCE)
    assert hook is not None and hook["state"] == HookState.COMPLETED and hook["claimed_by"] == "agent-a:1"
    assert 'node_manager_agent_lifecycle_actions_total{action="complete",result="ok"} 1.0' in metrics.render().decode()


def test_an_instance_without_a_node_is_continued_at_once(world: World, stubbed: tuple[Any, Stubber]) -> None:
    autoscaling, stub = stubbed
    record_hook(world.store, HOOK, ttl_seconds=3600)
    expect_complete(stub)

    def no_node(cmd: Command) -> Any:
        raise NodeNotFoundError(cmd.instance_id)

    engine = ScriptedEngine(no_node)
    world.send(command("lifecycle-ev-1"))
    consumer(world, engine, autoscaling).handle(world.receive())
    assert world.item("lifecycle-ev-1")["status"] == "skipped" and world.in_queue() == 0
    assert get_hook(world.store, INSTANCE)["state"] == HookState.COMPLETED


def test_an_action_auto_scaling_no_longer_knows_is_marked_gone_without_retrying(
    world: World, stubbed: tuple[Any, Stubber]
) -> None:
    autoscaling, stub = stubbed
    record_hook(world.store, HOOK, ttl_seconds=3600)
    stub.add_client_error("complete_lifecycle_action", "ValidationError", NO_ACTION, 400)
    world.send(command("lifecycle-ev-1"))
    consumer(world, ScriptedEngine(), autoscaling).handle(world.receive())
    assert world.item("lifecycle-ev-1")["status"] == "succeeded" and world.in_queue() == 0
    assert get_hook(world.store, INSTANCE)["state"] == HookState.GONE


def test_a_throttled_completion_leaves_the_action_pending_for_the_next_finisher(
    world: World, stubbed: tuple[Any, Stubber]
) -> None:
    autoscaling, stub = stubbed
    record_hook(world.store, HOOK, ttl_seconds=3600)
    stub.add_client_error("complete_lifecycle_action", "Throttling", "Rate exceeded", 400)
    expect_complete(stub)
    hooks = HookFinisher(world.store, AutoScaling(autoscaling), "agent-a:1")
    assert hooks.complete(INSTANCE, "drain done") is False
    assert get_hook(world.store, INSTANCE)["state"] == HookState.PENDING
    assert hooks.complete(INSTANCE, "drain done") is True
    assert hooks.complete(INSTANCE, "drain done") is False  # completed: nothing pending, no call


def test_a_duplicate_delivery_of_a_finished_drain_completes_an_action_left_pending(
    world: World, stubbed: tuple[Any, Stubber]
) -> None:
    autoscaling, stub = stubbed
    sent = command("lifecycle-ev-1")
    world.send(sent)
    consumer(world, ScriptedEngine(), autoscaling).handle(world.receive())  # no action recorded yet: no call
    # the action was recorded before the drain ended, and the worker died between the drain's end and the call
    ended = datetime.fromisoformat(world.item("lifecycle-ev-1")["finished_at"])
    record_hook(world.store, HOOK, ttl_seconds=3600, now=ended - timedelta(seconds=1))
    expect_complete(stub)
    world.send(sent, record=False)  # SQS delivers it again
    consumer(world, ScriptedEngine(), autoscaling).handle(world.receive())
    assert get_hook(world.store, INSTANCE)["state"] == HookState.COMPLETED
    assert world.in_queue() == 0


def test_a_drain_whose_worker_died_before_notifying_completes_its_pending_action_when_notified_again(
    world: World, stubbed: tuple[Any, Stubber]
) -> None:
    # the worker wrote the drain's end, then died before the EventBridge event (and so before the action's
    # completion, which follows it): its message comes back once the worker is surely gone (NOTIFY_AGAIN), and the
    # action pending since before the drain ended is completed then, as a duplicate of a notified drain's is
    autoscaling, stub = stubbed
    sent = command("lifecycle-ev-1")
    world.send(sent)
    ended = datetime.now(UTC) - timedelta(minutes=5)  # more than a visibility timeout ago
    record_hook(world.store, HOOK, ttl_seconds=3600, now=ended - timedelta(seconds=30))
    attempt = world.store.start_command(sent, "agent-dead:9", 60, 3600, now=ended - timedelta(seconds=20))
    world.store.finish_command(
        "lifecycle-ev-1",
        "agent-dead:9",
        attempt,
        CommandStatus.SUCCEEDED,
        succeed(sent).model_dump(mode="json"),
        now=ended,
    )
    expect_complete(stub)
    c = consumer(world, ScriptedEngine(), autoscaling)
    c.handle(world.receive())  # the dead worker's message, visible again
    assert c.worker.counters.snapshot().get("notified_again") == 1
    assert world.item("lifecycle-ev-1").get("reported_at")
    assert get_hook(world.store, INSTANCE)["state"] == HookState.COMPLETED
    assert world.in_queue() == 0


def test_a_late_duplicate_of_an_earlier_drain_leaves_an_action_recorded_after_it_pending(
    world: World, stubbed: tuple[Any, Stubber]
) -> None:
    autoscaling, _ = stubbed
    old = command("rebalance-old")  # an earlier drain of the instance; it timed out (a PDB held it)
    world.send(old)
    consumer(world, ScriptedEngine(timed_out), autoscaling).handle(world.receive())
    assert world.item("rebalance-old")["status"] == "timed_out"
    # then Auto Scaling terminates the instance: the interruption Lambda records the action and queues its drain
    record_hook(world.store, HOOK, ttl_seconds=3600)
    world.store.record_command(command("lifecycle-ev-1", deadline_in=600), ttl_seconds=3600)
    world.send(old, record=False)  # SQS delivers the old drain's message again (or anyone replays it)
    c = consumer(world, ScriptedEngine(), autoscaling)
    c.handle(world.receive())  # no CompleteLifecycleAction (the Stubber fails an unexpected call)
    assert get_hook(world.store, INSTANCE)["state"] == HookState.PENDING  # left to the drain queued for it
    assert world.item("lifecycle-ev-1")["status"] == "queued"
    assert c.worker.counters.snapshot().get("hook_not_pending_at_end") == 1  # counted
    assert world.in_queue() == 0  # acknowledged


def test_a_long_drain_records_heartbeats_until_its_deadline(world: World, stubbed: tuple[Any, Stubber]) -> None:
    autoscaling, stub = stubbed
    record_hook(world.store, HOOK, ttl_seconds=3600)
    release = threading.Event()

    def slow(cmd: Command) -> Any:
        release.wait(10)
        return succeed(cmd)

    c = consumer(world, ScriptedEngine(slow), autoscaling, lifecycle_heartbeat_seconds=0.0)
    world.send(command("lifecycle-ev-1", deadline_in=120))
    worker = threading.Thread(target=c.handle, args=(world.receive(),))
    worker.start()
    try:
        while not c.worker.jobs.list():
            threading.Event().wait(0.02)
        stub.add_response("record_lifecycle_action_heartbeat", {}, HOOK_PARAMS)
        c.heartbeat_once()
        stub.add_response("record_lifecycle_action_heartbeat", {}, HOOK_PARAMS)
        c.heartbeat_once()
        stub.assert_no_pending_responses()
        expect_complete(stub)
    finally:
        release.set()
        worker.join(10)
    assert get_hook(world.store, INSTANCE)["state"] == HookState.COMPLETED


def test_no_heartbeat_past_the_drains_deadline(world: World, stubbed: tuple[Any, Stubber]) -> None:
    autoscaling, stub = stubbed
    record_hook(world.store, HOOK, ttl_seconds=3600)
    release = threading.Event()

    def slow(cmd: Command) -> Any:
        release.wait(10)
        return succeed(cmd)

    c = consumer(world, ScriptedEngine(slow), autoscaling, lifecycle_heartbeat_seconds=0.0)
    world.send(command("lifecycle-ev-1", deadline_in=1.5))
    worker = threading.Thread(target=c.handle, args=(world.receive(),))
    worker.start()
    try:
        while not c.worker.jobs.list():
            threading.Event().wait(0.02)
        threading.Event().wait(1.6)
        c.heartbeat_once()  # past the cap: no call (the Stubber would fail on an unexpected one)
        expect_complete(stub)
    finally:
        release.set()
        worker.join(10)
