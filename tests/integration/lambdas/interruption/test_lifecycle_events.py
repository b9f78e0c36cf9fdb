"""The interruption Lambda on termination lifecycle actions and EC2 state changes, against moto (in process).

CompleteLifecycleAction is not in moto: the Lambda's calls to it go through a client wrapped in botocore's
Stubber, which checks the exact parameters; everything else (ASGs, tables, queue) is moto. Nor does moto hold an
instance on a termination hook: ``on_hook`` puts it in ``Terminating:Wait`` as Auto Scaling does before it sends the
action (the Lambda acts only on an instance in that state: ``lambdas.interruption.verify``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto.autoscaling.models import autoscaling_backends

from adapters.aws.autoscaling import AutoScaling
from adapters.aws.ec2 import Ec2
from adapters.aws.gateway import AwsGateway
from adapters.aws.sqs import CommandQueue
from adapters.dynamo.hooks import get_hook
from core.lifecycle import HookState, LifecycleAction
from core.model import Command, CommandStatus, utcnow
from lambdas.common.telemetry import Telemetry
from lambdas.interruption.decide import Plan
from lambdas.interruption.execute import Effects, execute
from lambdas.interruption.handler import Deps, handle
from lambdas.interruption.plan import AwaitDrain, RecordHook
from tests.integration.lambdas.interruption.world import (
    ACCOUNT,
    CLUSTER,
    EVENTS,
    NODES,
    REGION,
    World,
    counted,
    emf,
    logs,
    member,
)

pytestmark = pytest.mark.filterwarnings("ignore:Couldn't determine the remaining time left")


def event_time() -> datetime:
    """A few seconds ago, read when the event is built: the Lambda judges it against the wall clock (no ``now``
    passed), and a lifecycle drain's deadline is 15 minutes after it; a time taken at import made these tests fail
    once the whole suite took longer than that to reach them (a slower machine)."""
    return datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=5)


HOOK = "node-manager-drain"
TOKEN = "87654321-4321-4321-4321-210987654321"


def hook_event(
    instance_id: str, *, event_id: str = "ev-hook-1", hook: str = HOOK, asg: str = NODES, token: str = TOKEN
) -> dict[str, Any]:
    raw = json.loads((EVENTS / "lifecycle-terminate-action.json").read_text())
    raw["id"] = event_id
    raw["time"] = event_time().strftime("%Y-%m-%dT%H:%M:%SZ")
    raw["detail"].update(
        {
            "EC2InstanceId": instance_id,
            "LifecycleHookName": hook,
            "AutoScalingGroupName": asg,
            "LifecycleActionToken": token,
        }
    )
    return raw


def on_hook(instance_id: str, asg: str = NODES) -> str:
    """Put ``instance_id`` in ``Terminating:Wait`` in moto, as Auto Scaling does when a termination hook holds it
    (DescribeAutoScalingInstances then reports that state); returns the instance id."""
    group = autoscaling_backends[ACCOUNT][REGION].autoscaling_groups[asg]
    (state,) = [s for s in group.instance_states if s.instance.id == instance_id]
    state.lifecycle_state = "Terminating:Wait"
    return instance_id


def state_event(instance_id: str, state: str, event_id: str = "ev-state-1") -> dict[str, Any]:
    raw = json.loads((EVENTS / "ec2-state-change-terminated.json").read_text())
    raw.update(id=event_id, time=event_time().strftime("%Y-%m-%dT%H:%M:%SZ"))
    raw["detail"] = {"instance-id": instance_id, "state": state}
    return raw


@pytest.fixture
def stubbed() -> Iterator[Stubber]:
    client = boto3.client("autoscaling", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stub:
        yield stub
        stub.assert_no_pending_responses()


def deps_with(world: World, stub: Stubber, **overrides: Any) -> Deps:
    deps = world.deps(**overrides)
    deps.aws = AwsGateway(
        AutoScaling(world.autoscaling, lifecycle_client=stub.client),
        Ec2(world.ec2),
        CommandQueue(world.sqs, world.queue_url),
    )
    return deps


def expect_continue(stub: Stubber, instance_id: str) -> None:
    stub.add_response(
        "complete_lifecycle_action",
        {},
        {
            "LifecycleHookName": HOOK,
            "AutoScalingGroupName": NODES,
            "LifecycleActionToken": TOKEN,
            "LifecycleActionResult": "CONTINUE",
            "InstanceId": instance_id,
        },
    )


def drain_item(
    world: World,
    command_id: str,
    instance_id: str,
    status: CommandStatus,
    finished_ago: float | None = None,
) -> None:
    command = Command(
        command_id=command_id,
        cluster=CLUSTER,
        kind="drain",
        instance_id=instance_id,
        reason="refresh",
        deadline=utcnow() + timedelta(minutes=10),
    )
    world.store.record_command(command, ttl_seconds=3600, now=utcnow() - timedelta(minutes=5))
    values: dict[str, Any] = {"status": status.value}
    if finished_ago is not None:
        values["finished_at"] = (utcnow() - timedelta(seconds=finished_ago)).isoformat()
    world.store.update(f"CMD#{command_id}", values)


def test_a_hook_becomes_one_drain_and_is_recorded_for_the_agent(world: World, stubbed: Stubber) -> None:
    instance = on_hook(world.members(NODES)[0])
    member(world, instance)
    raw = hook_event(instance)
    response = handle(raw, deps_with(world, stubbed))
    assert response["status"] == "acted"
    [message] = world.messages()
    command = Command.model_validate_json(message["Body"])
    assert command.command_id == "lifecycle-ev-hook-1" and command.kind.value == "drain"
    sent_at = datetime.strptime(raw["time"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert command.deadline == sent_at + timedelta(seconds=900) and command.reason == f"asg-lifecycle:{NODES}"
    assert command.node_name == "ip-10-0-1-5.ec2.internal"
    hook = get_hook(world.store, instance)
    assert hook is not None and hook["state"] == HookState.PENDING and hook["token"] == TOKEN

    # the same event again (idempotency record), and again without it (CMD#/HOOK# records): still one drain
    assert handle(hook_event(instance), deps_with(world, stubbed)).get("replayed") is True
    again = handle(hook_event(instance), deps_with(world, stubbed, idempotency_table_name=None))
    assert again["status"] == "acted"  # re-sends the still-queued command (the agent drops the duplicate)
    assert [c["command"]["command_id"] for c in world.commands()] == ["lifecycle-ev-hook-1"]
    assert "skip hook: hook_already_recorded" in json.dumps(again["actions"])


def test_a_hook_of_another_tool_or_a_foreign_group_is_left_alone(world: World, stubbed: Stubber) -> None:
    instance = world.members(NODES)[0]
    response = handle(hook_event(instance, hook="someone-elses-hook"), deps_with(world, stubbed))
    assert response["status"] == "acknowledged" and response["reason"] == "foreign_hook"
    assert get_hook(world.store, instance) is None and world.messages() == []


def test_a_hook_for_an_instance_our_refresher_is_draining_waits_for_that_drain(
    world: World,
    stubbed: Stubber,
) -> None:
    instance = on_hook(world.members(NODES)[0])
    drain_item(world, "refresh-run1-step3", instance, CommandStatus.RUNNING)
    response = handle(hook_event(instance), deps_with(world, stubbed))
    assert response["status"] == "acted" and world.messages() == []  # no second drain
    assert "left to the agent" in json.dumps(response["actions"])
    assert get_hook(world.store, instance)["state"] == HookState.PENDING


def test_a_hook_after_a_recent_successful_drain_is_continued_at_once(world: World, stubbed: Stubber) -> None:
    instance = on_hook(world.members(NODES)[0])
    drain_item(world, "refresh-run1-step3", instance, CommandStatus.SUCCEEDED, finished_ago=60)
    expect_continue(stubbed, instance)
    response = handle(hook_event(instance), deps_with(world, stubbed))
    assert "completed with CONTINUE" in json.dumps(response["actions"]) and world.messages() == []
    assert get_hook(world.store, instance)["state"] == HookState.COMPLETED


def test_an_old_or_failed_drain_does_not_count_a_new_drain_is_sent(world: World, stubbed: Stubber) -> None:
    instance = on_hook(world.members(NODES)[0])
    drain_item(world, "spot-old", instance, CommandStatus.SUCCEEDED, finished_ago=7200)
    drain_item(world, "refresh-failed", instance, CommandStatus.TIMED_OUT, finished_ago=30)
    handle(hook_event(instance), deps_with(world, stubbed))
    [message] = world.messages()
    assert json.loads(message["Body"])["command_id"] == "lifecycle-ev-hook-1"


def test_a_drain_that_ended_between_the_read_and_the_hook_record_is_completed_by_the_lambda(
    world: World,
    stubbed: Stubber,
) -> None:
    instance = world.members(NODES)[0]
    drain_item(world, "refresh-run1-step3", instance, CommandStatus.SUCCEEDED, finished_ago=1)
    action = LifecycleAction(instance_id=instance, asg_name=NODES, hook_name=HOOK, token=TOKEN, event_id="e")
    deps = deps_with(world, stubbed)
    expect_continue(stubbed, instance)
    results = execute(
        Plan((RecordHook(action), AwaitDrain(action, "refresh-run1-step3"))),
        Effects(
            store=world.store,
            aws=deps.aws,
            telemetry=Telemetry(deps.telemetry.metrics),
            logger=__import__("logging").getLogger("test"),
            ttl_seconds=3600,
        ),
        utcnow(),
    )
    assert results[1]["result"].startswith("drain already succeeded: completed with CONTINUE")


def test_an_action_auto_scaling_forgot_is_not_retried(world: World, stubbed: Stubber) -> None:
    instance = on_hook(world.members(NODES)[0])
    drain_item(world, "refresh-run1-step3", instance, CommandStatus.SUCCEEDED, finished_ago=60)
    stubbed.add_client_error(
        "complete_lifecycle_action", "ValidationError", f"No active Lifecycle Action found with token {TOKEN}", 400
    )
    response = handle(hook_event(instance), deps_with(world, stubbed))
    assert "no longer has the action" in json.dumps(response["actions"])
    assert get_hook(world.store, instance)["state"] == HookState.GONE


def test_a_terminated_member_loses_its_record_and_its_queued_commands(world: World, stubbed: Stubber) -> None:
    instance = world.members(NODES)[0]
    member(world, instance)
    drain_item(world, "spot-queued", instance, CommandStatus.QUEUED)
    drain_item(world, "refresh-running", instance, CommandStatus.RUNNING)
    world.ec2.terminate_instances(InstanceIds=[instance])  # EC2 must agree (lambdas.interruption.verify)
    response = handle(state_event(instance, "shutting-down"), deps_with(world, stubbed))
    assert response["status"] == "acted"
    assert world.store.get(f"NODE#{instance}") is None
    cancelled = world.store.get_command("spot-queued")
    assert cancelled is not None and cancelled["status"] == "skipped" and cancelled["reported_at"]
    assert cancelled["result"]["message"] == "cancelled: instance shutting-down"
    assert world.store.get_command("refresh-running")["status"] == "running"
    # the agent meeting the cancelled command's message treats it as a finished duplicate
    from agent.consumer.decisions import RefusalDisposition, on_refusal

    assert on_refusal(cancelled, utcnow().timestamp(), 60, 30)[0] is RefusalDisposition.DUPLICATE
    # a second delivery finds nothing left to do
    assert (
        handle(state_event(instance, "terminated", "ev-state-2"), deps_with(world, stubbed))["reason"] == "not_a_member"
    )


def test_a_forged_state_change_for_a_running_member_changes_nothing(world: World, stubbed: Stubber, capsys) -> None:  # type: ignore[no-untyped-def]
    instance = world.members(NODES)[0]
    member(world, instance)
    drain_item(world, "spot-queued", instance, CommandStatus.QUEUED)
    response = handle(state_event(instance, "terminated"), deps_with(world, stubbed))
    assert response["status"] == "acknowledged" and response["reason"] == "unverified"
    assert world.store.get(f"NODE#{instance}") is not None
    assert world.store.get_command("spot-queued")["status"] == "queued"
    out = capsys.readouterr().out
    assert counted(emf(out), "EventsRefused") == 1
    assert any(line["level"] == "WARNING" and "EC2 reports it running" in line["message"] for line in logs(out))


@pytest.mark.parametrize("state, reason", [("running", "state_ignored"), ("stopping", "not_a_member")])
def test_other_states_and_non_members_are_acknowledged(
    world: World,
    stubbed: Stubber,
    state: str,
    reason: str,
) -> None:
    response = handle(state_event(world.bare_instance, state), deps_with(world, stubbed))
    assert response["status"] == "acknowledged" and response["reason"] == reason


def test_a_forged_lifecycle_action_for_a_live_member_is_refused_and_changes_nothing(
    world: World,
    stubbed: Stubber,
    capsys,  # type: ignore[no-untyped-def]  # pytest's capsys fixture
) -> None:
    instance = world.members(NODES)[0]  # InService: no hook holds it
    member(world, instance)
    response = handle(hook_event(instance, event_id="ev-forged"), deps_with(world, stubbed))
    assert response["status"] == "acknowledged" and response["reason"] == "unverified"
    assert get_hook(world.store, instance) is None and world.messages() == [] and world.commands() == []
    out = capsys.readouterr().out
    assert counted(emf(out), "EventsRefused") == 1
    assert any("Auto Scaling reports it InService" in line["message"] for line in logs(out))
