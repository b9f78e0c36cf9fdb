"""The local test world behaves as the parts of a real kOps cluster the product relies on.

Real kube-apiserver + etcd, moto server; the simulator plays kubelet, scheduler and controllers.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from core.model import parse_provider_id
from localworld.cluster import cluster_instances, create_foreign_asg, launch_untagged_instance
from localworld.simulator.objects import is_live, node_ready, pod_ready
from localworld.workloads import (
    block_with_pdb,
    deploy_pods_on_node,
    deploy_workloads,
    get_pdb,
    pods_on_node,
    wait_pods_ready,
)
from localworld.world import LocalWorld

pytestmark = pytest.mark.world

NS = "workloads"


def evict(api: k8s.ApiClient, namespace: str, name: str) -> None:
    """The Eviction API with an Eviction body that names no apiVersion: the server takes the eviction subresource's
    own version (policy/v1beta1 on v1.20, which rejects an explicit policy/v1 body; policy/v1 from v1.22)."""
    body = k8s.V1Eviction(metadata=k8s.V1ObjectMeta(name=name, namespace=namespace))
    k8s.CoreV1Api(api).create_namespaced_pod_eviction(name, namespace, body)


def test_eviction_body_versions_on_this_server(small: LocalWorld) -> None:
    """Documents the server: a policy/v1 Eviction body is refused (400), policy/v1beta1 is accepted."""
    world = small
    deploy_workloads(world.api, NS, web_replicas=0, api_replicas=0, daemonset=False, bare_pod=False)
    pods = [p.metadata.name for p in wait_pods_ready_models(world, 2, "app=scratch")]
    core = world.core
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod_eviction(
            pods[0],
            NS,
            k8s.V1Eviction(
                api_version="policy/v1", kind="Eviction", metadata=k8s.V1ObjectMeta(name=pods[0], namespace=NS)
            ),
        )
    assert err.value.status == 400
    core.create_namespaced_pod_eviction(
        pods[1],
        NS,
        k8s.V1Eviction(
            api_version="policy/v1beta1", kind="Eviction", metadata=k8s.V1ObjectMeta(name=pods[1], namespace=NS)
        ),
    )


def wait_pods_ready_models(world: LocalWorld, count: int, selector: str) -> list[k8s.V1Pod]:
    wait_pods_ready(world.api, NS, count, selector)
    return world.core.list_namespaced_pod(NS, label_selector=selector).items


def pod_names(world: LocalWorld, namespace: str, selector: str) -> dict[str, dict[str, Any]]:
    items = world.rest.get(f"/api/v1/namespaces/{namespace}/pods", labelSelector=selector)["items"]
    return {p["metadata"]["name"]: p for p in items}


def wait_pdb(world: LocalWorld, name: str, allowed: int, timeout: float = 10.0) -> dict[str, Any]:
    assert world.simulator is not None

    def current() -> dict[str, Any] | None:
        pdb = get_pdb(world.api, NS, name)
        status = pdb.get("status") or {}
        ok = (
            status.get("observedGeneration") == pdb["metadata"]["generation"]
            and status.get("disruptionsAllowed", 0) == allowed
        )
        return pdb if ok else None

    return world.simulator.wait_for(current, timeout, f"PDB {name} to allow {allowed} disruptions")


@pytest.fixture
def small(world: LocalWorld) -> LocalWorld:
    """3 masters + 3 workers, simulator running."""
    world.setup_cluster(nodes_per_az=1)
    return world


def test_simulator_registers_a_node_per_cluster_instance_with_its_provider_id(small: LocalWorld) -> None:
    world = small
    assert world.cluster is not None and world.simulator is not None
    instances = {i["InstanceId"]: i for i in cluster_instances(world.client("ec2"), world.cluster.name)}
    nodes = world.core.list_node().items
    assert len(instances) == 6
    assert len(nodes) == 6
    by_instance = {parse_provider_id(n.spec.provider_id)[1]: n for n in nodes}
    assert set(by_instance) == set(instances)
    for iid, inst in instances.items():
        node = by_instance[iid]
        az = inst["Placement"]["AvailabilityZone"]
        assert node.spec.provider_id == f"aws:///{az}/{iid}"
        assert node.metadata.name == inst["PrivateDnsName"]
        labels = node.metadata.labels
        assert labels["topology.kubernetes.io/zone"] == az
        assert labels["kubernetes.io/hostname"] == node.metadata.name
        group = labels["kops.k8s.io/instancegroup"]
        if group.startswith("master-"):
            assert "node-role.kubernetes.io/master" in labels and "node-role.kubernetes.io/control-plane" in labels
            assert any(t.key == "node-role.kubernetes.io/master" for t in node.spec.taints or [])
        else:
            assert group == f"nodes-{az}" and "node-role.kubernetes.io/node" in labels
        ready = [c for c in node.status.conditions if c.type == "Ready"]
        assert ready and ready[0].status == "True"


def test_instances_of_other_clusters_and_untagged_ones_get_no_node(small: LocalWorld) -> None:
    world = small
    assert world.cluster is not None and world.simulator is not None
    foreign_asg = create_foreign_asg(world.session, world.cluster, size=1)
    untagged = launch_untagged_instance(world.session, world.cluster)
    # a new instance of our own cluster proves the simulator looked after the foreign ones were created
    asg = world.client("autoscaling")
    asg.set_desired_capacity(AutoScalingGroupName=world.cluster.worker_asgs["us-east-1a"], DesiredCapacity=2)
    world.simulator.nodes_ready(7, timeout=10)
    world.simulator.wait_settled()
    ids = {parse_provider_id(n.spec.provider_id)[1] for n in world.core.list_node().items}
    foreign = asg.describe_auto_scaling_groups(AutoScalingGroupNames=[foreign_asg])["AutoScalingGroups"][0]
    assert foreign["Instances"], "moto launched the foreign ASG's instance"
    assert not ids & {i["InstanceId"] for i in foreign["Instances"]}
    assert untagged not in ids
    assert len(ids) == 7


def test_node_naming_by_instance_id(world: LocalWorld) -> None:
    world.setup_cluster(nodes_per_az=1, node_naming="id")
    for node in world.core.list_node().items:
        assert node.metadata.name == parse_provider_id(node.spec.provider_id)[1]


def test_never_join_and_join_delay(small: LocalWorld) -> None:
    world = small
    assert world.cluster is not None and world.simulator is not None
    world.simulator.join_delay = 1.0
    before = {i["InstanceId"] for i in cluster_instances(world.client("ec2"), world.cluster.name)}
    # MaxSize first: the local world refuses a desired capacity above it, as Auto Scaling does (localworld.aws_rules)
    world.client("autoscaling").update_auto_scaling_group(
        AutoScalingGroupName=world.cluster.worker_asgs["us-east-1b"], MaxSize=3, DesiredCapacity=3
    )
    new = sorted({i["InstanceId"] for i in cluster_instances(world.client("ec2"), world.cluster.name)} - before)
    assert len(new) == 2
    world.simulator.never_join(new[0])
    world.simulator.wait_for(lambda: world.simulator.node_for_instance(new[1]), 10, f"a node for {new[1]}")
    time.sleep(0.5)  # several EC2 polls and passes after the joined one
    assert world.simulator.node_for_instance(new[0]) is None
    assert len(world.core.list_node().items) == 7


def test_deployment_pods_run_ready_with_owner_chain_and_pdb_status(small: LocalWorld) -> None:
    world = small
    wl = deploy_workloads(world.api, NS)
    # 6 web + 3 api + 2 scratch + 1 standalone + 6 DaemonSet pods (the DaemonSet tolerates the master taint)
    pods = wait_pods_ready(world.api, NS, 18)
    web = [p for p in pods if p["metadata"]["labels"]["app"] == "web"]
    assert len(web) == 6
    rs = world.rest.get(f"/apis/apps/v1/namespaces/{NS}/replicasets/{wl.replicasets['web']}")
    deploy = world.rest.get(f"/apis/apps/v1/namespaces/{NS}/deployments/web")
    assert rs["metadata"]["ownerReferences"][0]["uid"] == deploy["metadata"]["uid"]
    workers = {
        n["metadata"]["name"]
        for n in world.simulator.nodes()
        if "node-role.kubernetes.io/node" in n["metadata"]["labels"]
    }
    for pod in web:
        assert pod["metadata"]["ownerReferences"][0]["uid"] == rs["metadata"]["uid"]
        assert pod["spec"]["nodeName"] in workers, "workloads land on workers only (masters are tainted)"
        assert pod["status"]["phase"] == "Running"
    assert len({p["spec"]["nodeName"] for p in web}) == 3, "spread over the 3 workers"
    api_pods = [p for p in pods if p["metadata"]["labels"]["app"] == "api"]
    assert all(p["spec"]["terminationGracePeriodSeconds"] == 2 for p in api_pods)
    ds_nodes = {p["spec"]["nodeName"] for p in pods if p["metadata"]["labels"]["app"] == "node-agent"}
    assert len(ds_nodes) == 6
    web_pdb = wait_pdb(world, "web", 2)["status"]
    assert (web_pdb["currentHealthy"], web_pdb["desiredHealthy"], web_pdb["expectedPods"]) == (6, 4, 6)
    api_pdb = wait_pdb(world, "api", 1)["status"]
    assert (api_pdb["currentHealthy"], api_pdb["desiredHealthy"], api_pdb["expectedPods"]) == (3, 2, 3)


def test_eviction_succeeds_and_the_pod_is_replaced_on_another_node(small: LocalWorld) -> None:
    world = small
    deploy_workloads(world.api, NS)
    wait_pods_ready(world.api, NS, 18)
    wait_pdb(world, "web", 2)
    before = pod_names(world, NS, "app=web")
    before_uids = {p["metadata"]["uid"] for p in before.values()}
    victim = next(iter(before.values()))
    node = victim["spec"]["nodeName"]
    world.core.patch_node(node, {"spec": {"unschedulable": True}})  # cordon, as a drain does first
    evict(world.api, NS, victim["metadata"]["name"])

    def replaced() -> list[dict[str, Any]]:
        pods = pod_names(world, NS, "app=web")
        live = [p for p in pods.values() if is_live(p) and pod_ready(p)]
        gone = victim["metadata"]["name"] not in pods
        return live if gone and len(live) == 6 else []

    live = world.simulator.wait_for(replaced, 10, "the evicted web pod to be replaced")
    new = [p for p in live if p["metadata"]["uid"] not in before_uids]
    assert len(new) == 1
    assert new[0]["spec"]["nodeName"] != node, "the replacement avoids the cordoned node"
    wait_pdb(world, "web", 2)


def test_eviction_is_refused_with_429_when_the_pdb_allows_none(small: LocalWorld) -> None:
    world = small
    deploy_workloads(world.api, NS)
    wait_pods_ready(world.api, NS, 18)
    name = block_with_pdb(world.api, NS, "scratch")
    wait_pdb(world, name, 0)
    pod = next(iter(pod_names(world, NS, "app=scratch")))
    with pytest.raises(ApiException) as err:
        evict(world.api, NS, pod)
    assert err.value.status == 429
    assert pod in pod_names(world, NS, "app=scratch")


def test_pdb_disruptions_are_spent_by_evictions(small: LocalWorld) -> None:
    """Two evictions spend web's budget of 2 while slow replacements are not Ready; a third is refused."""
    world = small
    deploy_workloads(world.api, NS)
    wait_pods_ready(world.api, NS, 18)
    wait_pdb(world, "web", 2)
    # stop the simulator so replacements stay away: the budget stays spent
    world.stop_simulator()
    names = sorted(pod_names(world, NS, "app=web"))
    evict(world.api, NS, names[0])
    evict(world.api, NS, names[1])
    with pytest.raises(ApiException) as err:
        evict(world.api, NS, names[2])
    assert err.value.status == 429


def test_graceful_deletion_completes_after_the_grace_period(small: LocalWorld) -> None:
    world = small
    deploy_workloads(world.api, NS)
    wait_pods_ready(world.api, NS, 18)
    name = sorted(pod_names(world, NS, "app=api"))[0]
    started = time.monotonic()
    world.core.delete_namespaced_pod(name, NS)  # the pod's own grace: 2 s
    pod = world.core.read_namespaced_pod(name, NS)
    assert pod.metadata.deletion_timestamp is not None
    assert pod.metadata.deletion_grace_period_seconds == 2
    time.sleep(1.0)
    assert name in pod_names(world, NS, "app=api"), "still terminating within its grace period"
    world.simulator.wait_for(lambda: name not in pod_names(world, NS, "app=api"), 5, f"{name} to be deleted")
    assert time.monotonic() - started >= 2.0
    wait_pods_ready(world.api, NS, 3, "app=api")


def test_terminated_instance_loses_its_node_and_pods(small: LocalWorld) -> None:
    world = small
    assert world.cluster is not None
    deploy_workloads(world.api, NS)
    wait_pods_ready(world.api, NS, 18)
    asg_name = world.cluster.worker_asgs["us-east-1a"]
    asg = world.client("autoscaling")
    iid = asg.describe_auto_scaling_groups(AutoScalingGroupNames=[asg_name])["AutoScalingGroups"][0]["Instances"][0][
        "InstanceId"
    ]
    node = world.simulator.node_for_instance(iid)
    assert node is not None
    name = node["metadata"]["name"]
    assert pods_on_node(world.api, name)
    world.client("ec2").terminate_instances(InstanceIds=[iid])
    world.simulator.wait_for(
        lambda: name not in {n.metadata.name for n in world.core.list_node().items}, 10, f"node {name} to be deleted"
    )
    world.simulator.wait_for(lambda: not pods_on_node(world.api, name), 10, f"the pods of {name} to be deleted")
    # the controllers replace the lost pods on the remaining workers (the DaemonSet pod is just gone)
    wait_pods_ready(world.api, NS, 6, "app=web")
    wait_pods_ready(world.api, NS, 3, "app=api")


def test_reset_leaves_an_empty_world(small: LocalWorld) -> None:
    world = small
    deploy_workloads(world.api, NS)
    wait_pods_ready(world.api, NS, 18)
    world.reset()
    assert world.simulator is None
    assert world.core.list_node().items == []
    assert world.core.list_pod_for_all_namespaces().items == []
    assert world.rest.get("/apis/apps/v1/replicasets")["items"] == []
    assert world.rest.get("/apis/policy/v1beta1/poddisruptionbudgets")["items"] == []
    assert world.client("autoscaling").describe_auto_scaling_groups()["AutoScalingGroups"] == []
    assert world.client("ec2").describe_instances()["Reservations"] == []
    assert world.client("dynamodb").list_tables()["TableNames"] == []
    # kept: namespaces (never deleted) and the agent's RBAC
    assert NS in world.kube.namespaces()
    k8s.RbacAuthorizationV1Api(world.api).read_cluster_role("node-manager-agent")


def test_agent_token_has_only_the_agent_rbac(small: LocalWorld) -> None:
    world = small
    deploy_workloads(world.api, NS)
    wait_pods_ready(world.api, NS, 18)
    wait_pdb(world, "web", 2)
    agent = k8s.CoreV1Api(world.agent_api)
    nodes = agent.list_node().items
    assert len(nodes) == 6
    worker = next(n.metadata.name for n in nodes if "node-role.kubernetes.io/node" in n.metadata.labels)
    agent.patch_node(worker, {"spec": {"unschedulable": True}})
    pods = agent.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={worker}").items
    web = next(p.metadata.name for p in pods if p.metadata.labels.get("app") == "web")
    evict(world.agent_api, NS, web)
    agent.create_namespaced_event(
        "default",
        k8s.CoreV1Event(
            metadata=k8s.V1ObjectMeta(generate_name="drain-"),
            involved_object=k8s.V1ObjectReference(kind="Node", name=worker),
            reason="NodeDrained",
            message="test",
            type="Normal",
        ),
    )
    k8s.CoordinationV1Api(world.agent_api).create_namespaced_lease(
        "node-manager", k8s.V1Lease(metadata=k8s.V1ObjectMeta(name="agent-leader"))
    )
    forbidden = [
        lambda: agent.delete_node(worker),
        lambda: agent.list_namespaced_secret("default"),
        lambda: agent.create_namespaced_pod(
            NS,
            k8s.V1Pod(
                metadata=k8s.V1ObjectMeta(name="x"),
                spec=k8s.V1PodSpec(containers=[k8s.V1Container(name="c", image="i")]),
            ),
        ),
        lambda: k8s.CoordinationV1Api(world.agent_api).create_namespaced_lease(
            NS, k8s.V1Lease(metadata=k8s.V1ObjectMeta(name="elsewhere"))
        ),
        lambda: k8s.AppsV1Api(world.agent_api).delete_namespaced_daemon_set("node-agent", NS),
    ]
    for call in forbidden:
        with pytest.raises(ApiException) as err:
            call()
        assert err.value.status == 403


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_drain_empties_a_node_with_30_pods(small: LocalWorld, capsys: pytest.CaptureFixture[str]) -> None:
    world = small
    assert world.simulator is not None
    deploy_workloads(world.api, NS)
    wait_pods_ready(world.api, NS, 18)
    worker = next(
        n["metadata"]["name"]
        for n in world.simulator.nodes()
        if "node-role.kubernetes.io/node" in n["metadata"]["labels"]
    )
    fill = deploy_pods_on_node(world.api, worker, 30, grace=0)
    started = time.monotonic()
    result = subprocess.run(
        [
            "kubectl",
            "--kubeconfig",
            str(world.kubeconfig),
            "drain",
            worker,
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            "--force",
            "--timeout=60s",
        ],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    left = [p for p in pods_on_node(world.api, worker) if is_live(p)]
    assert all(p["metadata"]["ownerReferences"][0]["kind"] == "DaemonSet" for p in left), left
    assert world.core.read_node(worker).spec.unschedulable is True
    wait_pods_ready(world.api, "bench", 30, f"app={fill}")
    with capsys.disabled():
        print(f"\n[localworld] kubectl drain of {worker} (30 grace-0 pods + workloads) took {elapsed:.2f} s")
    assert all(node_ready(n) for n in world.simulator.nodes())
