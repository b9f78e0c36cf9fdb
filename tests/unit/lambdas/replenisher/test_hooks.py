"""The termination lifecycle hook follows the cluster's groups (``lambdas.replenisher.hooks``): the pure choice of
the groups to ask and of a hook that differs, and the whole path through the handler on moto (a group created after
deploy, a group deleted and created again under the same name, a foreign group, a hook changed by hand, dry run).

moto stores hooks (DescribeLifecycleHooks / PutLifecycleHook work) but does not delete them with their group, as
AWS does; the re-creation test deletes the hook itself to play AWS's part."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from core.exceptions import AwsRequestError
from core.kops import ManagedGroup, Role
from core.model import NodeRecord
from core.settings import InterruptionSettings, ReplenisherSettings
from lambdas.replenisher.handler import Deps, handle
from lambdas.replenisher.hooks import Seen, difference, due, ensure_hooks
from lambdas.replenisher.world import Group
from localworld.cluster import create_kops_cluster
from localworld.eventbus import scheduled_event

CLUSTER = "demo.k8s.local"
HOOK = "node-manager-drain"
T0 = datetime(2026, 12, 2, 8, 0, tzinfo=UTC)
WANTED = {
    "LifecycleHookName": HOOK,
    "LifecycleTransition": "autoscaling:EC2_INSTANCE_TERMINATING",
    "HeartbeatTimeout": 300,
    "DefaultResult": "CONTINUE",
}


def group(name: str, created: str = "2026-12-01 00:00:00+00:00") -> Group:
    info = ManagedGroup(
        name=name,
        cluster=CLUSTER,
        role=Role.NODE,
        instance_group=None,
        pool="nodes",
        availability_zones=("a",),
    )
    return Group(info=info, desired=1, min_size=1, max_size=1, created=created)


# -- pure ----------------------------------------------------------------------------------------------------------


def test_due_asks_new_recreated_and_stale_groups_only() -> None:
    groups = [group("new"), group("same"), group("recreated", created="2026-12-02 07:00:00+00:00"), group("stale")]
    seen = {
        "same": Seen("2026-12-01 00:00:00+00:00", T0 - timedelta(minutes=59)),
        "recreated": Seen("2026-12-01 00:00:00+00:00", T0 - timedelta(minutes=1)),
        "stale": Seen("2026-12-01 00:00:00+00:00", T0 - timedelta(minutes=60)),
    }

    assert due(groups, seen, T0, recheck_seconds=3600) == ["new", "recreated", "stale"]


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (None, "missing"),
        (
            {"LifecycleTransition": "autoscaling:EC2_INSTANCE_LAUNCHING"},
            "transition autoscaling:EC2_INSTANCE_LAUNCHING",
        ),
        ({"HeartbeatTimeout": 3600}, "heartbeat 3600 s"),
        ({"DefaultResult": "ABANDON"}, "default result ABANDON"),
    ],
)
def test_difference_names_what_is_wrong(change: dict[str, Any] | None, why: str) -> None:
    hook = None if change is None else {**WANTED, **change}

    assert (difference(hook, 300) or "").startswith(why)
    assert difference(WANTED, 300) is None


class FailingKeeper:
    def lifecycle_hook(self, asg_name: str, hook_name: str) -> dict[str, Any] | None:
        raise AwsRequestError("DescribeLifecycleHooks", "AccessDenied", "not allowed")

    def put_termination_hook(self, asg_name: str, hook_name: str, heartbeat_seconds: int) -> None:
        raise AssertionError("not reached")


class Counter:
    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def count(self, name: str, value: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + value


class Quiet:
    def info(self, *args: Any, **kwargs: Any) -> None: ...

    def warning(self, *args: Any, **kwargs: Any) -> None: ...


def test_a_refused_call_is_reported_and_asked_again_later_not_raised() -> None:
    settings = ReplenisherSettings(cluster_name=CLUSTER, table_name="t", queue_url="q")
    seen: dict[str, Seen] = {"gone": Seen("x", T0)}
    telemetry = Counter()

    results = ensure_hooks(FailingKeeper(), {"a": group("a")}, seen, settings, T0, telemetry, Quiet())  # type: ignore[arg-type]  # a counting double for Telemetry

    assert results["a"].startswith("failed: ")
    assert seen == {}  # "a" not recorded (asked again next time), "gone" forgotten (no longer a group)
    assert telemetry.counts == {"LifecycleHooksFailed": 1}


# -- the handler on moto -----------------------------------------------------------------------------------------


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Deps, Any, Any]]:
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "NodeManagerTest")
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "replenisher")
    with mock_aws():
        session = boto3.Session(region_name="us-east-1")
        info = create_kops_cluster(session, name=CLUSTER, azs=("us-east-1a", "us-east-1b"), nodes_per_az=1)
        autoscaling = session.client("autoscaling")
        deps = Deps.from_clients(
            ReplenisherSettings.from_env(info.env()),
            dynamodb=session.resource("dynamodb"),
            autoscaling=autoscaling,
            ec2=session.client("ec2"),
            sqs=session.client("sqs"),
            region="us-east-1",
        )
        yield deps, autoscaling, info


def hooks_of(autoscaling: Any, name: str) -> list[dict[str, Any]]:
    return list(autoscaling.describe_lifecycle_hooks(AutoScalingGroupName=name)["LifecycleHooks"])


def cluster_group_names(autoscaling: Any) -> list[str]:
    groups = autoscaling.describe_auto_scaling_groups()["AutoScalingGroups"]
    return sorted(g["AutoScalingGroupName"] for g in groups)


def add_group(autoscaling: Any, like: str, name: str, cluster: str = CLUSTER) -> None:
    """A group shaped like ``like`` (its launch template and subnets), tagged for ``cluster``."""
    [model] = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[like])["AutoScalingGroups"]
    template = (
        model.get("LaunchTemplate") or model["MixedInstancesPolicy"]["LaunchTemplate"]["LaunchTemplateSpecification"]
    )
    autoscaling.create_auto_scaling_group(
        AutoScalingGroupName=name,
        LaunchTemplate={"LaunchTemplateId": template["LaunchTemplateId"]},
        MinSize=0,
        MaxSize=1,
        DesiredCapacity=0,
        VPCZoneIdentifier=model["VPCZoneIdentifier"],
        Tags=[
            {"Key": k, "Value": v, "PropagateAtLaunch": True}
            for k, v in {"KubernetesCluster": cluster, "k8s.io/role/node": "1"}.items()
        ],
    )


def tick(deps: Deps, now: datetime) -> dict[str, Any]:
    return handle(scheduled_event("replenisher-tick", time=now), deps, now=now)


def emitted(out: str, metric: str) -> list[float]:
    """The values of ``metric`` in the Embedded Metric Format lines Powertools printed."""
    values: list[float] = []
    for line in out.splitlines():
        if line.startswith("{") and '"_aws"' in line:
            values += json.loads(line).get(metric, [])
    return values


def test_every_group_of_the_cluster_gets_the_hook_once(
    world: tuple[Deps, Any, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    deps, autoscaling, _ = world
    names = cluster_group_names(autoscaling)

    first = tick(deps, T0)
    second = tick(deps, T0 + timedelta(minutes=5))

    assert first["hooks"] == dict.fromkeys(names, "put (missing)")
    assert "hooks" not in second  # nothing due: no DescribeLifecycleHooks call either
    for name in names:
        [hook] = hooks_of(autoscaling, name)
        assert {k: hook[k] for k in WANTED} == WANTED
    assert emitted(capsys.readouterr().out, "LifecycleHooksPut") == [1.0] * len(names)


def test_a_group_created_after_deploy_is_hooked_at_the_next_tick(world: tuple[Deps, Any, Any]) -> None:
    deps, autoscaling, _ = world
    tick(deps, T0)
    add_group(autoscaling, like=cluster_group_names(autoscaling)[-1], name="spot-b.demo.k8s.local")
    add_group(autoscaling, like=cluster_group_names(autoscaling)[-1], name="nodes.other.k8s.local", cluster="other")

    response = tick(deps, T0 + timedelta(minutes=5))

    assert response["hooks"] == {"spot-b.demo.k8s.local": "put (missing)"}
    assert len(hooks_of(autoscaling, "spot-b.demo.k8s.local")) == 1
    assert hooks_of(autoscaling, "nodes.other.k8s.local") == []  # another cluster's group is not touched


def test_a_group_recreated_under_its_name_gets_the_hook_again(world: tuple[Deps, Any, Any]) -> None:
    deps, autoscaling, _ = world
    name = cluster_group_names(autoscaling)[-1]
    like = cluster_group_names(autoscaling)[0]
    tick(deps, T0)
    autoscaling.delete_auto_scaling_group(AutoScalingGroupName=name, ForceDelete=True)
    autoscaling.delete_lifecycle_hook(AutoScalingGroupName=name, LifecycleHookName=HOOK)  # AWS: gone with the group
    add_group(autoscaling, like=like, name=name)  # between two ticks: only its CreatedTime tells

    response = tick(deps, T0 + timedelta(minutes=5))

    assert response["hooks"] == {name: "put (missing)"}
    assert len(hooks_of(autoscaling, name)) == 1


def test_a_hook_changed_by_hand_is_corrected_after_the_recheck_period(world: tuple[Deps, Any, Any]) -> None:
    deps, autoscaling, _ = world
    name = cluster_group_names(autoscaling)[0]
    tick(deps, T0)
    autoscaling.put_lifecycle_hook(
        AutoScalingGroupName=name,
        LifecycleHookName=HOOK,
        LifecycleTransition="autoscaling:EC2_INSTANCE_TERMINATING",
        HeartbeatTimeout=3600,
        DefaultResult="ABANDON",
    )

    soon = tick(deps, T0 + timedelta(minutes=5))
    later = tick(deps, T0 + timedelta(seconds=deps.settings.lifecycle_hook_recheck_seconds))

    assert "hooks" not in soon
    assert later["hooks"][name] == "put (heartbeat 3600 s)"
    [hook] = hooks_of(autoscaling, name)
    assert (hook["HeartbeatTimeout"], hook["DefaultResult"]) == (300, "CONTINUE")


def test_dry_run_and_switched_off_change_nothing(world: tuple[Deps, Any, Any]) -> None:
    deps, autoscaling, _ = world
    names = cluster_group_names(autoscaling)
    deps.settings = deps.settings.model_copy(update={"dry_run": True})

    dry = tick(deps, T0)
    deps.settings = deps.settings.model_copy(update={"dry_run": False, "lifecycle_hooks": False})
    off = tick(deps, T0 + timedelta(minutes=5))

    assert dry["hooks"] == dict.fromkeys(names, "would put (missing)")
    assert "hooks" not in off
    assert all(hooks_of(autoscaling, name) == [] for name in names)


def test_the_hook_put_is_the_one_the_interruption_lambda_answers() -> None:
    """Both Lambdas default to one name (the stack sets neither): the interruption Lambda's rule and decision match
    actions of ``LIFECYCLE_HOOK_NAME`` only."""
    name = ReplenisherSettings.model_fields["lifecycle_hook_name"].default
    assert name == InterruptionSettings.model_fields["lifecycle_hook_name"].default == HOOK


def test_a_group_is_not_asked_again_when_an_instance_is_unregistered(world: tuple[Deps, Any, Any]) -> None:
    """``gather`` rebuilds the groups with the launch times of unregistered instances: the ``CreatedTime`` stays, so
    a warm environment does not ask every group again (found by bench.replenisher: 30 extra calls on a retry)."""
    deps, autoscaling, _ = world
    groups = autoscaling.describe_auto_scaling_groups()["AutoScalingGroups"]
    ids = [i["InstanceId"] for g in groups for i in g["Instances"]]
    for iid in ids:
        deps.store.put_node(NodeRecord(instance_id=iid, node_name=iid, ready=True, reported_at=T0), 3600)
    tick(deps, T0)
    deps.store.delete_node(ids[0])  # now one instance has no node: gather reads launch times

    again = tick(deps, T0 + timedelta(minutes=2))

    assert "hooks" not in again
