"""A drain notified again (``RefusalDisposition.NOTIFY_AGAIN``: its worker died between its terminal write and its
event) completes its instance's lifecycle action as the drain's own end would have: only an action pending when the
drain ended, with CONTINUE after a failed drain too, never after a refused control-plane drain. Auto Scaling is
botocore's Stubber (no call is expected unless added), the rest moto, as in ``test_hooks.py``."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from adapters.dynamo.hooks import get_hook, record_hook
from agent.consumer.decisions import CONTROL_PLANE_REFUSED
from core.lifecycle import HookState
from core.model import CommandStatus
from tests.unit.agent.consumer_world import INSTANCE, ScriptedEngine, World, command, succeed
from tests.unit.agent.hook_world import HOOK, HOOK_PARAMS, consumer


@pytest.fixture
def stubbed() -> Iterator[tuple[Any, Stubber]]:
    autoscaling = boto3.client("autoscaling", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(autoscaling) as stub:
        yield autoscaling, stub
        stub.assert_no_pending_responses()


def ended_unnotified(world: World, status: CommandStatus, hook_before_end_s: float, **result: Any) -> None:
    """The dead worker's drain ``lifecycle-ev-1`` ended ``status`` five minutes ago, never notified; the action was
    recorded ``hook_before_end_s`` seconds before that end (negative: after it)."""
    sent = command("lifecycle-ev-1")
    world.send(sent)
    ended = datetime.now(UTC) - timedelta(minutes=5)
    record_hook(world.store, HOOK, ttl_seconds=3600, now=ended - timedelta(seconds=hook_before_end_s))
    attempt = world.store.start_command(sent, "agent-dead:9", 60, 3600, now=ended - timedelta(seconds=60))
    body = succeed(sent).model_copy(update={"status": status}).model_dump(mode="json")
    world.store.finish_command("lifecycle-ev-1", "agent-dead:9", attempt, status, {**body, **result}, now=ended)


def test_a_failed_drain_notified_again_continues_its_action_as_its_own_end_would(
    world: World, stubbed: tuple[Any, Stubber]
) -> None:
    autoscaling, stub = stubbed
    ended_unnotified(world, CommandStatus.FAILED, hook_before_end_s=30)
    stub.add_response("complete_lifecycle_action", {}, {**HOOK_PARAMS, "LifecycleActionResult": "CONTINUE"})
    c = consumer(world, ScriptedEngine(), autoscaling)
    c.handle(world.receive())
    assert c.worker.counters.snapshot().get("notified_again") == 1
    assert get_hook(world.store, INSTANCE)["state"] == HookState.COMPLETED and world.in_queue() == 0


@pytest.mark.parametrize(
    ("hook_before_end_s", "result"),
    [(-30, {}), (30, {CONTROL_PLANE_REFUSED: True})],
    ids=["action recorded after the drain ended", "control-plane drain refused"],
)
def test_a_drain_notified_again_leaves_an_action_its_end_did_not_complete(
    world: World, stubbed: tuple[Any, Stubber], hook_before_end_s: float, result: dict[str, Any]
) -> None:
    autoscaling, _ = stubbed  # no CompleteLifecycleAction expected: Auto Scaling would end the instance undrained
    calls: list[str] = []
    autoscaling.meta.events.register(
        "provide-client-params.autoscaling.CompleteLifecycleAction", lambda **kwargs: calls.append("complete")
    )
    ended_unnotified(world, CommandStatus.SUCCEEDED, hook_before_end_s, **result)
    c = consumer(world, ScriptedEngine(), autoscaling)
    c.handle(world.receive())
    assert calls == []
    assert c.worker.counters.snapshot().get("notified_again") == 1
    assert get_hook(world.store, INSTANCE)["state"] == HookState.PENDING
    assert world.item("lifecycle-ev-1").get("reported_at") and world.in_queue() == 0
