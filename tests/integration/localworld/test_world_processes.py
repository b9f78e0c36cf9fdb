"""The local world's AWS side and its process handling, as spawned Lambdas and the agent use them."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import yaml

from core.settings import AgentSettings
from localworld.cluster import AGENT_EVENT_SOURCE
from localworld.world import LocalWorld

pytestmark = pytest.mark.world


def test_cluster_resources_exist_as_the_settings_name_them(world: LocalWorld) -> None:
    info = world.setup_cluster(nodes_per_az=1, wait_ready=False)
    settings = AgentSettings.from_env(info.env())
    assert settings.cluster_name == info.name and settings.queue_url == info.queue_url
    tables = world.client("dynamodb").list_tables()["TableNames"]
    assert {info.table_name, info.idempotency_table_name} <= set(tables)
    attrs = world.client("sqs").get_queue_attributes(QueueUrl=info.queue_url, AttributeNames=["All"])["Attributes"]
    redrive = json.loads(attrs["RedrivePolicy"])
    assert int(redrive["maxReceiveCount"]) == 3 and redrive["deadLetterTargetArn"].endswith("node-manager-commands-dlq")
    groups = world.client("autoscaling").describe_auto_scaling_groups()["AutoScalingGroups"]
    names = {g["AutoScalingGroupName"] for g in groups}
    assert names == set(info.all_asgs)
    assert "master-us-east-1a.masters.demo.k8s.local" in names and "nodes-us-east-1a.demo.k8s.local" in names
    worker = next(g for g in groups if g["AutoScalingGroupName"] == info.worker_asgs["us-east-1b"])
    assert worker["MixedInstancesPolicy"]["InstancesDistribution"]["OnDemandPercentageAboveBaseCapacity"] == 0
    tags = {t["Key"]: t["Value"] for t in worker["Tags"]}
    assert tags["KubernetesCluster"] == info.name and tags["kops.k8s.io/instancegroup"] == "nodes-us-east-1b"


def test_agent_events_reach_the_observer_queue(world: LocalWorld) -> None:
    info = world.setup_cluster(nodes_per_az=1, wait_ready=False)
    events = world.client("events")
    detail = {"instance_id": "i-0123456789abcdef0", "status": "succeeded"}
    events.put_events(
        Entries=[
            {"Source": AGENT_EVENT_SOURCE, "DetailType": "Node Drain Succeeded", "Detail": json.dumps(detail)},
            {"Source": "someone.else", "DetailType": "Other", "Detail": "{}"},
        ]
    )
    sqs = world.client("sqs")
    got = sqs.receive_message(QueueUrl=info.observer_queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=2)
    bodies = [json.loads(m["Body"]) for m in got.get("Messages", [])]
    assert [(b["source"], b["detail-type"], b["detail"]) for b in bodies] == [
        (AGENT_EVENT_SOURCE, "Node Drain Succeeded", detail)
    ]


def test_spawned_process_gets_the_world_env_and_is_killed_on_reset(world: LocalWorld, tmp_path) -> None:
    info = world.setup_cluster(nodes_per_az=1, wait_ready=False)
    proc = world.spawn("localworld.probe", {"PROBE_EXTRA": "x"}, tmp_path / "probe.log")
    deadline = time.monotonic() + 10
    while "env" not in proc.output() and time.monotonic() < deadline:
        time.sleep(0.05)
    env = json.loads(proc.output().splitlines()[0])["env"]
    assert env["AWS_ENDPOINT_URL"] == world.moto.endpoint_url
    assert env["KUBECONFIG"] == str(world.agent_kubeconfig)
    assert {k: env[k] for k in info.env()} == info.env()
    assert env["PROBE_EXTRA"] == "x"
    kubeconfig = yaml.safe_load(Path(env["KUBECONFIG"]).read_text())
    assert kubeconfig["clusters"][0]["cluster"]["server"] == world.kube.url
    assert proc.alive()
    world.reset()
    assert not proc.alive()
    with pytest.raises(ProcessLookupError):
        os.kill(proc.pid, 0)


def test_spawned_process_terminate_and_kill(world: LocalWorld, tmp_path) -> None:
    proc = world.spawn("localworld.probe", {"PROBE_SECONDS": "30"}, tmp_path / "a.log")
    proc.terminate()
    assert proc.wait(10) != 0
    proc = world.spawn("localworld.probe", {"PROBE_SECONDS": "30"}, tmp_path / "b.log")
    proc.kill()
    assert proc.wait(10) == -9


def test_reset_recovers_a_deleted_namespace_and_changed_rbac(world: LocalWorld) -> None:
    from kubernetes import client as k8s

    from localworld.workloads import ensure_namespace

    core, rbac = world.core, k8s.RbacAuthorizationV1Api(world.api)
    ensure_namespace(world.api, "doomed")
    core.delete_namespace("doomed")
    assert core.read_namespace("doomed").status.phase == "Terminating"  # no namespace controller runs
    core.delete_namespace("node-manager")
    rbac.delete_cluster_role("node-manager-agent")
    world.reset()
    assert "doomed" not in world.kube.namespaces()
    assert core.read_namespace("node-manager").status.phase == "Active"
    ensure_namespace(world.api, "doomed")
    assert core.read_namespace("doomed").status.phase == "Active"
    assert rbac.read_cluster_role("node-manager-agent").rules
    assert rbac.read_namespaced_role("node-manager-agent-leader-election", "node-manager").rules
