"""The interruption Lambda end to end against moto (in process): a small kOps-like set of ASGs, the state and
idempotency tables from core/schema.py, and the command queue (``world.py``; what the Lambda must not act
on: ``test_scope.py``; crashes part way: ``test_crashes.py``).

Events are the fixtures of record (tests/events/) with the instance id, event id and time of the case.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from adapters.dynamo.runs import RunStore
from core.model import Command, CommandStatus, NodeRecord
from core.runs import GroupSurge, Run, RunOptions, RunStep, StepState
from core.settings import RefresherSettings
from lambdas.interruption import handler as interruption_handler
from lambdas.interruption.handler import handle, lambda_handler
from lambdas.refresher.decide.context import Context
from lambdas.refresher.world import World as RefreshWorld
from tests.integration.lambdas.interruption.world import (
    CLUSTER,
    MASTER,
    NODES,
    REGION,
    T0,
    assert_nothing_changed,
    counted,
    emf,
    event,
    logs,
    member,
)

pytestmark = pytest.mark.filterwarnings(
    # handle() is called without a Lambda context here; lambda_handler registers it in production.
    "ignore:Couldn't determine the remaining time left"
)


# -- Spot warning -------------------------------------------------------------------------------------------


def test_spot_warning_queues_a_drain_and_replaces_the_instance_early(world, capsys):
    victim = world.members(NODES)[0]
    member(world, victim)
    desired = world.group(NODES)["DesiredCapacity"]

    response = handle(
        event("spot-interruption-warning.json", victim, event_id="ev-spot-1"),
        world.deps(),
        now=T0 + timedelta(seconds=3),
    )

    assert response["status"] == "acted"
    [item] = world.commands()
    assert item["sk"] == "CMD#spot-ev-spot-1" and item["status"] == CommandStatus.QUEUED.value
    [message] = world.messages()
    command = Command.model_validate_json(message["Body"])
    assert command.command_id == "spot-ev-spot-1"
    assert command.kind.value == "drain" and command.instance_id == victim and command.cluster == CLUSTER
    assert command.deadline == T0 + timedelta(seconds=120)
    assert command.node_name == "ip-10-0-1-5.ec2.internal"
    assert message["MessageAttributes"]["kind"]["StringValue"] == "drain"
    assert message["MessageAttributes"]["cluster"]["StringValue"] == CLUSTER
    # detached without decrement: the ASG launched a replacement and kept its desired capacity
    group = world.group(NODES)
    assert victim not in world.members(NODES)
    assert group["DesiredCapacity"] == desired
    assert len(group["Instances"]) == desired
    [detach] = world.detaches()
    assert detach["instance_id"] == victim and detach["asg_name"] == NODES and detach["state"] == "detached"
    # the detached instance still runs until EC2 reclaims it (two minutes later)
    state = world.ec2.describe_instances(InstanceIds=[victim])["Reservations"][0]["Instances"][0]["State"]["Name"]
    assert state == "running"
    records = emf(capsys.readouterr().out)
    assert counted(records, "CommandsQueued") == 1
    assert counted(records, "InstancesDetached") == 1
    assert counted(records, "EventsReceived") == 1
    assert counted(records, "EventsIgnored") == 0


@pytest.mark.parametrize("marked", [True, False])
def test_an_old_record_the_agents_membership_mark_confirms_names_the_node(world, marked):
    """The agent writes NODE# only when it changes; its MEMBERSHIP mark (one write per resync) keeps the record
    fresh for ``MEMBERSHIP_MAX_AGE_SECONDS`` (600 s)."""
    victim = world.members(NODES)[0]
    written = T0 - timedelta(seconds=3600)  # the node did not change for an hour
    world.store.put_node(
        NodeRecord(instance_id=victim, node_name="ip-10-0-1-9.ec2.internal", asg_name=NODES, reported_at=written),
        ttl_seconds=7200,
    )
    if marked:
        world.store.put_membership_mark(T0 - timedelta(seconds=40), nodes=3, ttl_seconds=600)

    handle(event("spot-interruption-warning.json", victim, event_id="ev-marked"), world.deps(), now=T0)

    command = Command.model_validate_json(world.messages()[0]["Body"])
    assert command.node_name == ("ip-10-0-1-9.ec2.internal" if marked else None)


def test_duplicate_event_is_handled_once(world, capsys):
    victim = world.members(NODES)[0]
    raw = event("spot-interruption-warning.json", victim, event_id="ev-dup")
    deps = world.deps()

    first = handle(raw, deps, now=T0 + timedelta(seconds=2))
    after_first = world.members(NODES)
    second = handle(json.loads(json.dumps(raw)), deps, now=T0 + timedelta(seconds=4))

    assert second["replayed"] is True
    assert {k: v for k, v in second.items() if k != "replayed"} == first
    assert len(world.commands()) == 1
    assert len(world.messages()) == 1
    assert world.members(NODES) == after_first  # no second detach, no second replacement
    assert len(world.detaches()) == 1
    assert counted(emf(capsys.readouterr().out), "EventsReplayed") == 1


def test_duplicate_after_the_idempotency_window_relies_on_the_table(world):
    """Without the idempotency record (expired, or no table), the CMD#/DETACH# records stop a second effect."""
    victim = world.members(NODES)[0]
    raw = event("spot-interruption-warning.json", victim, event_id="ev-late-dup")
    deps = world.deps(idempotency_table_name=None)
    handle(raw, deps, now=T0 + timedelta(seconds=2))
    command = Command.model_validate_json(world.messages()[0]["Body"])
    world.store.start_command(command, "agent-a", stale_after_seconds=60, ttl_seconds=3600)
    members = world.members(NODES)

    response = handle(raw, deps, now=T0 + timedelta(seconds=30))

    assert response["status"] == "acknowledged" and response["reason"] == "duplicate"
    assert world.messages() == []  # the first message was received above; nothing new was sent
    assert world.members(NODES) == members
    assert world.detaches()[0]["state"] == "detached"


def test_duplicate_of_a_still_queued_command_is_resent(world):
    """A queued CMD# may mean the first send was lost in a crash: the same command is sent again."""
    victim = world.members(NODES)[0]
    raw = event("spot-interruption-warning.json", victim, event_id="ev-resend")
    deps = world.deps(idempotency_table_name=None)
    handle(raw, deps, now=T0 + timedelta(seconds=2))
    handle(raw, deps, now=T0 + timedelta(seconds=9))

    bodies = [Command.model_validate_json(m["Body"]) for m in world.messages()]
    assert len(bodies) == 2 and bodies[0] == bodies[1]
    assert len(world.commands()) == 1
    assert len(world.detaches()) == 1


@pytest.mark.parametrize(
    ("fixture", "kind", "notice_seconds"),
    [("spot-interruption-warning-stop.json", "drain", 120), ("spot-interruption-warning-hibernate.json", "cordon", 0)],
)
def test_stop_drains_and_hibernate_cordons_without_detaching(world, fixture, kind, notice_seconds):
    """AWS warns two minutes before a stop; a hibernation begins with the warning (no time to drain in)."""
    victim = world.members(NODES)[0]
    before = world.members(NODES)

    response = handle(event(fixture, victim), world.deps(), now=T0 + timedelta(seconds=1))

    assert response["status"] == "acted"
    [message] = world.messages()
    command = Command.model_validate_json(message["Body"])
    assert command.kind.value == kind
    assert command.deadline == T0 + timedelta(seconds=notice_seconds)
    assert world.members(NODES) == before
    assert world.detaches() == []


def test_master_is_drained_but_not_detached(world):
    master = world.members(MASTER)[0]

    response = handle(event("spot-interruption-warning.json", master), world.deps(), now=T0 + timedelta(seconds=1))

    assert response["status"] == "acted"
    assert any(a["action"] == "skip early_replacement: control_plane" for a in response["actions"])
    [message] = world.messages()
    assert Command.model_validate_json(message["Body"]).instance_id == master
    assert world.members(MASTER) == [master]
    assert world.detaches() == []


def test_node_that_never_joined_still_gets_a_command_without_node_name(world):
    victim = world.members(NODES)[1]  # no NODE# record: the agent resolves the node or reports "skipped"

    handle(event("spot-interruption-warning.json", victim), world.deps(), now=T0 + timedelta(seconds=1))

    [message] = world.messages()
    command = Command.model_validate_json(message["Body"])
    assert command.instance_id == victim and command.node_name is None


# -- rebalance recommendation -------------------------------------------------------------------------------


@pytest.mark.parametrize(("policy", "kind"), [("ignore", None), ("cordon", "cordon"), ("drain", "drain")])
def test_rebalance_recommendation_follows_the_policy(world, policy, kind):
    victim = world.members(NODES)[0]
    before = world.members(NODES)
    now = T0 + timedelta(seconds=10)

    response = handle(
        event("rebalance-recommendation.json", victim, event_id="ev-rb"),
        world.deps(rebalance_policy=policy, rebalance_drain_timeout_seconds=900),
        now=now,
    )

    messages = world.messages()
    if kind is None:
        assert response["status"] == "acknowledged" and response["reason"] == "rebalance_ignored"
        assert messages == [] and world.commands() == []
    else:
        assert response["status"] == "acted"
        [message] = messages
        command = Command.model_validate_json(message["Body"])
        assert command.kind.value == kind and command.command_id == "rebalance-ev-rb"
        assert command.deadline == now + timedelta(seconds=900)
        assert world.store.get_command("rebalance-ev-rb")["status"] == "queued"
    assert world.members(NODES) == before
    assert world.detaches() == []


# -- the Lambda entry point ---------------------------------------------------------------------------------


@dataclass
class FakeContext:
    function_name: str = "interruption"
    function_version: str = "$LATEST"
    invoked_function_arn: str = f"arn:aws:lambda:{REGION}:123456789012:function:interruption"
    memory_limit_in_mb: int = 256
    aws_request_id: str = "req-1"
    log_group_name: str = "/aws/lambda/interruption"
    log_stream_name: str = "stream"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


def test_lambda_handler_reads_settings_from_the_environment(world, monkeypatch, capsys):
    for var, value in {
        "CLUSTER_NAME": CLUSTER,
        "TABLE_NAME": "state",
        "QUEUE_URL": world.queue_url,
        "IDEMPOTENCY_TABLE_NAME": "idempotency",
    }.items():
        monkeypatch.setenv(var, value)
    victim = world.members(NODES)[0]
    raw = event("spot-interruption-warning-stop.json", victim, time=datetime.now(UTC))

    response = lambda_handler(raw, FakeContext())

    assert response["status"] == "acted"
    assert len(world.messages()) == 1
    lines = logs(capsys.readouterr().out)
    assert lines and all(line["correlation_id"] == raw["id"] for line in lines)
    assert {line["function_request_id"] for line in lines} == {"req-1"}
    assert lambda_handler({"not": "an event"}, FakeContext())["status"] == "rejected"


def test_lambda_handler_takes_its_region_and_account_from_the_context(world, monkeypatch):
    """No ACCOUNT_ID: the function ARN names the account; a function in eu-west-1 does not act on us-east-1."""
    for var, value in {"CLUSTER_NAME": CLUSTER, "TABLE_NAME": "state", "QUEUE_URL": world.queue_url}.items():
        monkeypatch.setenv(var, value)
    monkeypatch.delenv("ACCOUNT_ID", raising=False)
    monkeypatch.setattr(interruption_handler._deps, "_value", None)  # settings read again from this environment
    groups = {NODES: world.members(NODES)}
    raw = event("spot-interruption-warning.json", groups[NODES][0], time=datetime.now(UTC))
    elsewhere = FakeContext(invoked_function_arn="arn:aws:lambda:eu-west-1:123456789012:function:interruption")

    response = lambda_handler(raw, elsewhere)

    assert response["status"] == "acknowledged" and response["reason"] == "foreign_region"
    assert_nothing_changed(world, groups)
    assert lambda_handler(raw, FakeContext())["status"] == "acted"


def test_a_direct_invocation_that_names_its_caller_is_logged_with_it(world, monkeypatch, capsys):
    """EventBridge sends no client context; the CLI (and anyone following the README) names the caller in it."""
    for var, value in {"CLUSTER_NAME": CLUSTER, "TABLE_NAME": "state", "QUEUE_URL": world.queue_url}.items():
        monkeypatch.setenv(var, value)
    monkeypatch.setattr(interruption_handler._deps, "_value", None)  # settings read again from this environment
    caller = "arn:aws:sts::123456789012:assumed-role/admin/mallory"
    context = FakeContext()
    context.client_context = SimpleNamespace(custom={"caller": caller})  # type: ignore[attr-defined]  # as Lambda gives it
    lambda_handler({"not": "an event"}, context)
    lines = logs(capsys.readouterr().out)
    assert any(line["level"] == "WARNING" and line.get("caller") == caller for line in lines), lines


# -- Spot warning for a node a refresh run is draining ------------------------------------------------------


def test_a_spot_warning_takes_over_the_refresh_drain_of_its_node(world, capsys):
    """A refresh run surged a spare and drains the old node when the warning comes (default ``REBALANCE_POLICY``):
    the refresh drain is tightened to the Spot deadline (one drain, one agent slot), no second drain is queued and
    nothing is detached (the run's spare is the replacement; no second one is launched)."""
    victim, spare_of_run = world.members(NODES)
    member(world, victim)
    world.autoscaling.set_desired_capacity(AutoScalingGroupName=NODES, DesiredCapacity=3)  # the run's surge
    run_id = "20240305T101000Z-abcdef"
    step = RunStep(
        index=0, group=NODES, role="node", instance_id=victim, state=StepState.DRAINING,
        surge_instance_id=spare_of_run, command_id=f"refresh-{run_id}-0",
    )  # fmt: skip
    run = Run(
        run_id=run_id,
        cluster=CLUSTER,
        options=RunOptions(trigger="schedule"),
        groups=[GroupSurge(name=NODES, role="node", min_size=2, original_desired=2, original_max=4, raised=1)],
        steps=[step],
        created_at=T0 - timedelta(minutes=10),
        updated_at=T0 - timedelta(minutes=1),
    )
    RunStore(world.store).create(run)
    refresher_settings = RefresherSettings(cluster_name=CLUSTER, table_name="state", queue_url=world.queue_url)
    drain = Context(run, RefreshWorld(), refresher_settings, T0 - timedelta(minutes=1)).drain_command(step)
    world.store.record_command(drain, ttl_seconds=3600, now=T0 - timedelta(minutes=1))
    world.store.start_command(drain, "agent-1", stale_after_seconds=60, ttl_seconds=3600, now=T0)
    members = world.members(NODES)

    response = handle(
        event("spot-interruption-warning.json", victim, event_id="ev-spot-9"),
        world.deps(),
        now=T0 + timedelta(seconds=2),
    )

    assert response["status"] == "acted", response
    [item] = world.commands()  # no second drain recorded
    assert item["sk"] == f"CMD#{drain.command_id}" and item["status"] == CommandStatus.RUNNING.value
    assert item["deadline_tightened_to"] == (T0 + timedelta(seconds=120)).isoformat()
    assert item["tightened_by"] == "spot-ev-spot-9"
    assert world.messages() == []  # nothing sent: the agent's running drain reads the deadline on its heartbeat
    assert world.detaches() == [] and world.members(NODES) == members  # no early detach beside the run's spare
    assert world.group(NODES)["DesiredCapacity"] == 3
    said = [a["action"] + ": " + a["result"] for a in response["actions"]]
    assert any("skip early_replacement: already_replacing" in a for a in said), said
    assert counted(emf(capsys.readouterr().out), "CommandsTightened") == 1
