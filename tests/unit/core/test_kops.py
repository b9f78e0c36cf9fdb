import pytest

from core.kops import Role, managed_group, pool_of


def _asg(tags, name="nodes-us-east-1a.demo.k8s.local", zones=("us-east-1a",)):
    return {
        "AutoScalingGroupName": name,
        "AvailabilityZones": list(zones),
        "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
    }


def test_worker_group_of_cluster():
    group = managed_group(
        _asg({"KubernetesCluster": "demo", "k8s.io/role/node": "1", "kops.k8s.io/instancegroup": "nodes-us-east-1a"}),
        "demo",
    )
    assert group is not None
    assert group.role is Role.NODE
    assert group.instance_group == "nodes-us-east-1a"
    assert group.pool == "nodes"


@pytest.mark.parametrize("role_tag", ["k8s.io/role/master", "k8s.io/role/control-plane"])
def test_control_plane_by_either_kops_tag(role_tag):
    group = managed_group(_asg({"KubernetesCluster": "demo", role_tag: "1"}), "demo")
    assert group is not None and group.role is Role.CONTROL_PLANE


def test_foreign_and_untagged_groups_are_not_managed():
    assert managed_group(_asg({"KubernetesCluster": "other", "k8s.io/role/node": "1"}), "demo") is None
    assert managed_group(_asg({}), "demo") is None


@pytest.mark.parametrize(
    "tags, zones, pool",
    [
        ({"kops.k8s.io/instancegroup": "nodes-us-east-1a"}, ("us-east-1a",), "nodes"),
        ({"kops.k8s.io/instancegroup": "spot-big-eu-west-3b"}, (), "spot-big"),
        ({"kops.k8s.io/instancegroup": "nodes"}, ("us-east-1a",), "nodes"),
        ({"kops.k8s.io/instancegroup": "nodes-us-east-1a", "node-manager/pool": "general"}, (), "general"),
        ({}, (), None),
    ],
)
def test_pool(tags, zones, pool):
    assert pool_of(tags, zones) == pool
