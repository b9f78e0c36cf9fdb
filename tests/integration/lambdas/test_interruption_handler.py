"""The interruption Lambda end to end against moto (in process): a small kOps-like set of ASGs, the state and
idempotency tables from core/schema.py, and the command queue.

Events are the fixtures of record (tests/events/) with the instance id, event id and time of the case.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from aws_lambda_powertools import Metrics
from botocore.exceptions import ClientError
from moto import mock_aws

from adapters.dynamo.runs import RunStore
from adapters.dynamo.store import Store
from core.exceptions import AwsUnavailableError, RetryableError
from core.kops import CLUSTER_TAG, INSTANCE_GROUP_TAG, NODE_ROLE_TAG
from core.model import Command, CommandStatus, NodeRecord
from core.runs import GroupSurge, Run, RunOptions, RunStep, StepState
from core.schema import idempotency_table, state_table
from core.settings import InterruptionSettings, RefresherSettings
from lambdas.interruption import handler as interruption_handler
from lambdas.interruption.handler import Deps, handle, lambda_handler
from lambdas.refresher.decide.context import Context
from lambdas.refresher.world import World as RefreshWorld
from localworld.spot_market import set_market

EVENTS = Path(__file__).resolve().parents[2] / "events"
REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's account, the one the fixtures of record carry
CLUSTER = "demo.k8s.local"
NODES = "nodes-us-east-1a.demo.k8s.local"
MASTER = "master-us-east-1a.masters.demo.k8s.local"
FOREIGN = "nodes-us-east-1a.other.k8s.local"
UNTAGGED = "batch-workers"
T0 = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=5)
AMI = "ami-0123456789abcdef0"  # moto does not check image ids; its default image catalogue is not loaded

pytestmark = pytest.mark.filterwarnings(
    # handle() is called without a Lambda context here; lambda_handler registers it in production.
    "ignore:Couldn't determine the remaining time left"
)


def event(name: str, instance_id: str, *, event_id: str | None = None, time: datetime = T0) -> dict[str, Any]:
    """A fixture of record, pointed at ``instance_id``."""
    raw = json.loads((EVENTS / name).read_text())
    raw["id"] = event_id or str(uuid.uuid4())
    raw["time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ")
    old = raw["detail"]["instance-id"]
    raw["detail"]["instance-id"] = instance_id
    raw["resources"] = [r.replace(old, instance_id) for r in raw["resources"]]
    return raw


@dataclass
class World:
    autoscaling: Any
    ec2: Any
    sqs: Any
    dynamodb: Any
    dynamodb_client: Any
    queue_url: str
    store: Store
    bare_instance: str

    def settings(self, **overrides: Any) -> InterruptionSettings:
        values = {
            "cluster_name": CLUSTER,
            "table_name": "state",
            "queue_url": self.queue_url,
            "idempotency_table_name": "idempotency",
            "account_id": ACCOUNT,
            **overrides,
        }
        return InterruptionSettings(**values)

    def deps(self, autoscaling: Any = None, **overrides: Any) -> Deps:
        return Deps.from_clients(
            self.settings(**overrides),
            dynamodb=self.dynamodb,
            autoscaling=autoscaling or self.autoscaling,
            ec2=self.ec2,
            sqs=self.sqs,
            dynamodb_client=self.dynamodb_client,
        )

    def group(self, name: str) -> dict[str, Any]:
        return self.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[name])["AutoScalingGroups"][0]

    def members(self, name: str) -> list[str]:
        return sorted(i["InstanceId"] for i in self.group(name)["Instances"])

    def messages(self) -> list[dict[str, Any]]:
        out = self.sqs.receive_message(
            QueueUrl=self.queue_url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], WaitTimeSeconds=0
        )
        return out.get("Messages", [])

    def commands(self) -> list[dict[str, Any]]:
        return list(self.store.query_prefix("CMD#", consistent=True))

    def detaches(self) -> list[dict[str, Any]]:
        return list(self.store.query_prefix("DETACH#", consistent=True))


def _asg(autoscaling: Any, name: str, subnet: str, size: int, tags: dict[str, str]) -> None:
    autoscaling.create_auto_scaling_group(
        AutoScalingGroupName=name,
        LaunchTemplate={"LaunchTemplateName": "kops", "Version": "$Latest"},
        MinSize=size,
        MaxSize=size + 2,
        DesiredCapacity=size,
        VPCZoneIdentifier=subnet,
        Tags=[
            {"Key": k, "Value": v, "PropagateAtLaunch": True, "ResourceId": name, "ResourceType": "auto-scaling-group"}
            for k, v in tags.items()
        ],
    )


@pytest.fixture
def world(monkeypatch):
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "NodeManagerTest")
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "interruption")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")  # faster start
    Metrics().clear_metrics()  # Powertools keeps unflushed metrics in class-level state shared by every Metrics()
    with mock_aws():
        ec2 = boto3.client("ec2", region_name=REGION)
        autoscaling = boto3.client("autoscaling", region_name=REGION)
        sqs = boto3.client("sqs", region_name=REGION)
        dynamodb = boto3.resource("dynamodb", region_name=REGION)
        dynamodb_client = boto3.client("dynamodb", region_name=REGION)
        dynamodb.create_table(**state_table("state"))
        dynamodb.create_table(**idempotency_table("idempotency"))
        queue_url = sqs.create_queue(QueueName="commands")["QueueUrl"]
        ec2.create_launch_template(
            LaunchTemplateName="kops", LaunchTemplateData={"ImageId": AMI, "InstanceType": "m5.large"}
        )
        subnet = next(s["SubnetId"] for s in ec2.describe_subnets()["Subnets"] if s["AvailabilityZone"] == "us-east-1a")
        kops = {CLUSTER_TAG: CLUSTER}
        _asg(autoscaling, NODES, subnet, 2, {**kops, NODE_ROLE_TAG: "1", INSTANCE_GROUP_TAG: "nodes-us-east-1a"})
        _asg(
            autoscaling,
            MASTER,
            subnet,
            1,
            {**kops, "k8s.io/role/control-plane": "1", INSTANCE_GROUP_TAG: "master-us-east-1a"},
        )
        _asg(autoscaling, FOREIGN, subnet, 1, {CLUSTER_TAG: "other.k8s.local", NODE_ROLE_TAG: "1"})
        _asg(autoscaling, UNTAGGED, subnet, 1, {"team": "batch"})
        # a kOps cluster on Spot: every group's instances are Spot Instances (moto launches them On-Demand)
        groups = autoscaling.describe_auto_scaling_groups()["AutoScalingGroups"]
        set_market(i["InstanceId"] for g in groups for i in g["Instances"])
        bare = ec2.run_instances(ImageId=AMI, MinCount=1, MaxCount=1)["Instances"][0]["InstanceId"]
        yield World(
            autoscaling, ec2, sqs, dynamodb, dynamodb_client, queue_url, Store(dynamodb.Table("state"), CLUSTER), bare
        )


def emf(out: str) -> list[dict[str, Any]]:
    """The CloudWatch EMF records printed by Powertools Metrics."""
    records = []
    for line in out.splitlines():
        if line.startswith("{") and '"_aws"' in line:
            records.append(json.loads(line))
    return records


def logs(out: str) -> list[dict[str, Any]]:
    """The JSON log lines printed by the Powertools Logger."""
    return [json.loads(line) for line in out.splitlines() if line.startswith("{") and '"level"' in line]


def counted(records: list[dict[str, Any]], name: str, **dimensions: str) -> int:
    total = 0
    for record in records:
        if name in record and all(record.get(k) == v for k, v in dimensions.items()):
            total += int(record[name]) if not isinstance(record[name], list) else int(sum(record[name]))
    return total


def member(world: World, instance_id: str, name: str = "ip-10-0-1-5.ec2.internal") -> None:
    world.store.put_node(
        NodeRecord(instance_id=instance_id, node_name=name, asg_name=NODES, ready=True, reported_at=datetime.now(UTC)),
        ttl_seconds=600,
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


# -- out of scope -------------------------------------------------------------------------------------------


def _assert_nothing_changed(world: World, groups: dict[str, list[str]]) -> None:
    assert world.commands() == []
    assert world.messages() == []
    assert world.detaches() == []
    for name, members in groups.items():
        assert world.members(name) == members


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        (FOREIGN, "other_cluster"),
        (UNTAGGED, "unmanaged_group"),
        ("bare", "not_in_asg"),
        ("unknown", "unknown_instance"),
    ],
)
def test_instances_outside_the_cluster_are_acknowledged(world, capsys, target, reason):
    groups = {name: world.members(name) for name in (NODES, MASTER, FOREIGN, UNTAGGED)}
    instance = {"bare": world.bare_instance, "unknown": "i-0fedcba9876543210"}.get(target) or groups[target][0]

    response = handle(event("spot-interruption-warning.json", instance), world.deps(), now=T0 + timedelta(seconds=1))

    assert response["status"] == "acknowledged" and response["reason"] == reason
    _assert_nothing_changed(world, groups)
    out = capsys.readouterr().out
    assert counted(emf(out), "EventsIgnored", reason=reason) == 1
    assert any(log.get("reason") == reason and instance in log["message"] for log in logs(out))


@pytest.mark.parametrize("forgery", ["on-demand", "stopped"])
def test_a_forged_spot_warning_invoked_directly_changes_nothing(world, capsys, forgery):
    """A direct invoke can carry an aws.ec2 event EC2 never sent: for an On-Demand worker, or a stopped Spot one,
    EC2's own answer refuses it (no drain, no detach)."""
    groups = {name: world.members(name) for name in (NODES, MASTER)}
    victim = groups[NODES][0]
    member(world, victim)
    if forgery == "on-demand":
        set_market([victim], None)
    else:
        world.ec2.stop_instances(InstanceIds=[victim])
    response = handle(event("spot-interruption-warning.json", victim), world.deps(), now=T0 + timedelta(seconds=1))

    assert response["status"] == "acknowledged" and response["reason"] == "unverified"
    _assert_nothing_changed(world, groups)
    assert not world.detaches()
    out = capsys.readouterr().out
    assert counted(emf(out), "EventsRefused") == 1
    assert counted(emf(out), "EventsIgnored", reason="unverified") == 1


class NoCalls:
    """An Auto Scaling client that fails the test if the handler reads anything (an out-of-scope event reads
    nothing)."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"autoscaling.{name} called for an event that is not the deployment's")


@pytest.mark.parametrize(
    ("envelope", "reason"),
    [({"region": "eu-west-1"}, "foreign_region"), ({"account": "210987654321"}, "foreign_account")],
)
def test_another_regions_or_accounts_warning_is_acknowledged_and_counted_never_acted_on(
    world, capsys, envelope, reason
):
    """The instance id names a member of the cluster here: only the envelope says the event is not ours."""
    groups = {NODES: world.members(NODES)}
    victim = groups[NODES][0]
    raw = {**event("spot-interruption-warning.json", victim), **envelope}

    response = handle(raw, world.deps(autoscaling=NoCalls()), now=T0 + timedelta(seconds=1))

    assert response["status"] == "acknowledged" and response["reason"] == reason
    _assert_nothing_changed(world, groups)
    out = capsys.readouterr().out
    assert counted(emf(out), "EventsOutOfScope", reason=reason) == 1
    assert counted(emf(out), "EventsIgnored", reason=reason) == 0
    # the same warning from the deployment's own region is acted on
    assert handle(event("spot-interruption-warning.json", victim), world.deps(), now=T0)["status"] == "acted"


def test_without_a_known_account_nothing_from_the_bus_is_acted_on(world, capsys):
    groups = {NODES: world.members(NODES)}

    response = handle(event("spot-interruption-warning.json", groups[NODES][0]), world.deps(account_id=None), now=T0)

    assert response["status"] == "acknowledged" and response["reason"] == "account_unknown"
    _assert_nothing_changed(world, groups)
    assert counted(emf(capsys.readouterr().out), "EventsOutOfScope", reason="account_unknown") == 1


def test_event_five_minutes_late_is_acknowledged(world, capsys):
    groups = {NODES: world.members(NODES)}
    victim = groups[NODES][0]

    response = handle(event("spot-interruption-warning.json", victim), world.deps(), now=T0 + timedelta(minutes=5))

    assert response["status"] == "acknowledged" and response["reason"] == "late"
    _assert_nothing_changed(world, groups)
    assert counted(emf(capsys.readouterr().out), "EventsIgnored", reason="late") == 1


def test_event_from_the_future_is_rejected_and_changes_nothing(world, capsys):
    """An event stamped 2100 would set a drain deadline no PDB retry ever reaches, and detach a live instance."""
    groups = {NODES: world.members(NODES)}
    victim = groups[NODES][0]

    response = handle(event("spot-interruption-warning.json", victim), world.deps(), now=T0 - timedelta(hours=1))

    assert response["status"] == "rejected" and response["reason"] == "time_in_future"
    _assert_nothing_changed(world, groups)
    assert counted(emf(capsys.readouterr().out), "EventsRejected", reason="time_in_future") == 1


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


# -- malformed ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fixture", "reason"),
    [
        ("malformed-missing-detail.json", "malformed"),
        ("malformed-bad-instance-id.json", "malformed"),
        ("malformed-wrong-detail-type.json", "unsupported_event"),
        ("malformed-unknown-instance-action.json", "malformed"),
        ("malformed-bad-time.json", "malformed"),
        ("malformed-missing-id.json", "malformed"),
    ],
)
def test_malformed_events_are_rejected_without_raising(world, capsys, fixture, reason):
    groups = {NODES: world.members(NODES)}
    raw = json.loads((EVENTS / fixture).read_text())

    response = handle(raw, world.deps())

    assert response["status"] == "rejected" and response["reason"] == reason and response["error"]
    _assert_nothing_changed(world, groups)
    assert world.dynamodb.Table("idempotency").scan()["Items"] == []
    out = capsys.readouterr().out
    assert counted(emf(out), "EventsRejected", reason=reason) == 1
    [line] = [log for log in logs(out) if log["level"] == "WARNING"]
    assert line["reason"] == reason and line["message"].startswith(f"event rejected ({reason})")


@pytest.mark.parametrize("raw", [None, "hello", [], {}])
def test_non_objects_are_rejected(world, raw):
    assert handle(raw, world.deps())["status"] == "rejected"


# -- crashes and transient faults ---------------------------------------------------------------------------


class DetachFailsOnce:
    """The real (moto) Auto Scaling client, whose first DetachInstances is throttled: a crash after the
    DETACH# intent was recorded and before the instance was detached."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.failures = 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def detach_instances(self, **kwargs: Any) -> Any:
        if self.failures:
            self.failures -= 1
            raise ClientError(
                {
                    "Error": {"Code": "Throttling", "Message": "Rate exceeded"},
                    "ResponseMetadata": {"HTTPStatusCode": 400},
                },
                "DetachInstances",
            )
        return self._client.detach_instances(**kwargs)


def test_crash_between_record_and_detach_is_completed_by_the_redelivered_event(world):
    victim = world.members(NODES)[0]
    raw = event("spot-interruption-warning.json", victim, event_id="ev-crash")
    desired = world.group(NODES)["DesiredCapacity"]

    with pytest.raises(AwsUnavailableError) as info:
        handle(raw, world.deps(autoscaling=DetachFailsOnce(world.autoscaling)), now=T0 + timedelta(seconds=2))
    assert isinstance(info.value, RetryableError)
    assert world.detaches()[0]["state"] == "intended"
    assert victim in world.members(NODES)
    assert world.dynamodb.Table("idempotency").scan()["Items"] == []  # the failed run left no idempotency record

    response = handle(raw, world.deps(), now=T0 + timedelta(seconds=40))  # Lambda's retry

    assert response["status"] == "acted"
    assert victim not in world.members(NODES)
    assert world.group(NODES)["DesiredCapacity"] == desired
    [detach] = world.detaches()
    assert detach["state"] == "detached"
    assert len(world.commands()) == 1
    bodies = {Command.model_validate_json(m["Body"]).command_id for m in world.messages()}
    assert bodies == {"spot-ev-crash"}  # sent, and re-sent because it was still queued


def test_intent_recorded_but_instance_already_detached_is_only_marked(world):
    """A crash after DetachInstances but before the mark: the instance is out of its group already."""
    victim = world.members(NODES)[0]
    world.store.record_detach(victim, NODES, "spot-interruption:ev-x", ttl_seconds=3600)
    world.autoscaling.detach_instances(
        InstanceIds=[victim], AutoScalingGroupName=NODES, ShouldDecrementDesiredCapacity=False
    )
    members = world.members(NODES)

    response = handle(
        event("spot-interruption-warning.json", victim, event_id="ev-x"), world.deps(), now=T0 + timedelta(seconds=20)
    )

    assert response["status"] == "acted"
    assert world.members(NODES) == members
    assert world.detaches()[0]["state"] == "detached"
    [message] = world.messages()
    assert Command.model_validate_json(message["Body"]).instance_id == victim


def test_dry_run_changes_nothing(world):
    groups = {NODES: world.members(NODES)}
    victim = groups[NODES][0]

    response = handle(
        event("spot-interruption-warning.json", victim), world.deps(dry_run=True), now=T0 + timedelta(seconds=1)
    )

    assert response["status"] == "dry_run"
    assert [a["result"] for a in response["actions"]] == ["dry run: not done"] * 5
    _assert_nothing_changed(world, groups)


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
    _assert_nothing_changed(world, groups)
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
