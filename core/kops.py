"""What kOps' tags say about an ASG: which cluster, which role, which instance group, which pool.

kOps tags each ASG it creates (and propagates the tags to the instances):

- ``KubernetesCluster=<cluster name>``
- ``k8s.io/role/master=1`` or ``k8s.io/role/control-plane=1`` for control-plane groups (the latter since kOps 1.26),
  ``k8s.io/role/node=1`` for workers
- ``kops.k8s.io/instancegroup=<instance group name>``

Pure functions over ``{"Key": ..., "Value": ...}`` tag lists as DescribeAutoScalingGroups returns them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict

CLUSTER_TAG = "KubernetesCluster"
INSTANCE_GROUP_TAG = "kops.k8s.io/instancegroup"
POOL_TAG = "node-manager/pool"
MASTER_ROLE_TAGS = ("k8s.io/role/master", "k8s.io/role/control-plane")
NODE_ROLE_TAG = "k8s.io/role/node"


class Role(str, Enum):
    CONTROL_PLANE = "control-plane"
    NODE = "node"
    UNKNOWN = "unknown"


class ManagedGroup(BaseModel):
    """An ASG that belongs to the configured cluster."""

    model_config = ConfigDict(frozen=True)

    name: str
    cluster: str
    role: Role
    instance_group: str | None
    pool: str | None
    availability_zones: tuple[str, ...] = ()


def tag_map(tags: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    return {str(t["Key"]): str(t.get("Value", "")) for t in tags}


def role_of(tags: Mapping[str, str]) -> Role:
    if not tags.keys().isdisjoint(MASTER_ROLE_TAGS):
        return Role.CONTROL_PLANE
    if NODE_ROLE_TAG in tags:
        return Role.NODE
    return Role.UNKNOWN


def pool_of(tags: Mapping[str, str], availability_zones: Iterable[str] = ()) -> str | None:
    """The compensation pool: the ``node-manager/pool`` tag, else the instance group minus its AZ suffix.

    >>> pool_of({"kops.k8s.io/instancegroup": "nodes-us-east-1a"})
    'nodes'
    """
    if tags.get(POOL_TAG):
        return tags[POOL_TAG]
    group = tags.get(INSTANCE_GROUP_TAG)
    if not group:
        return None
    for az in sorted(availability_zones, key=len, reverse=True):
        if group.endswith(f"-{az}"):
            return group[: -len(az) - 1]
    # kOps names per-AZ groups "<name>-<az>" or "<name>-<az letter>"; strip a region-looking suffix.
    parts = group.rsplit("-", 3)
    if len(parts) == 4 and parts[-1][:1].isdigit() and parts[-1][-1:].isalpha():
        return parts[0]
    return group


def managed_group(asg: Mapping[str, Any], cluster: str) -> ManagedGroup | None:
    """The ASG as a ``ManagedGroup`` if it is tagged for ``cluster``, else None (foreign or untagged).

    Args:
        asg: one element of DescribeAutoScalingGroups' ``AutoScalingGroups``.
        cluster: the configured cluster name.
    """
    tags = tag_map(asg.get("Tags", []))
    if tags.get(CLUSTER_TAG) != cluster:
        return None
    zones = tuple(asg.get("AvailabilityZones", []))
    return ManagedGroup(
        name=asg["AutoScalingGroupName"],
        cluster=cluster,
        role=role_of(tags),
        instance_group=tags.get(INSTANCE_GROUP_TAG),
        pool=pool_of(tags, zones),
        availability_zones=zones,
    )
