"""Reading the cluster's groups for the refresher from AWS, through the adapters' ports (kept out of ``world`` so
the decider imports no adapter)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from adapters.aws.ports import Ec2Port, GroupReader
from core.kops import managed_group
from lambdas.refresher.world import GroupFacts, InstanceFacts


def _template_spec(asg: dict[str, Any]) -> dict[str, Any] | None:
    """The group's launch template specification: ``LaunchTemplate`` or the MixedInstancesPolicy's."""
    if asg.get("LaunchTemplate"):
        return dict(asg["LaunchTemplate"])
    policy = asg.get("MixedInstancesPolicy") or {}
    spec = (policy.get("LaunchTemplate") or {}).get("LaunchTemplateSpecification")
    return dict(spec) if spec else None


def read_groups(
    autoscaling: GroupReader, ec2: Ec2Port, cluster: str, *, with_launch_facts: bool = False
) -> dict[str, GroupFacts]:
    """The cluster's managed groups as ``GroupFacts``.

    Calls: DescribeAutoScalingGroups (1 per 100 groups); with ``with_launch_facts`` also DescribeInstances
    (1 per 200 instances, for launch times) and DescribeLaunchTemplates (1, to resolve ``$Latest`` and
    ``$Default`` to version numbers).
    """
    raw = autoscaling.cluster_groups(cluster)
    versions: dict[str, tuple[str, str]] = {}
    times: dict[str, datetime] = {}
    if with_launch_facts:
        ids = [
            spec["LaunchTemplateId"]
            for spec in (_template_spec(g) for g in raw)
            if spec and spec.get("LaunchTemplateId")
        ]
        versions = ec2.template_versions(ids)
        times = ec2.launch_times([i["InstanceId"] for g in raw for i in g.get("Instances", [])])
    out: dict[str, GroupFacts] = {}
    for asg in raw:
        group = managed_group(asg, cluster)
        if group is None:
            continue
        version = None
        spec = _template_spec(asg)
        if spec and spec.get("LaunchTemplateId") in versions:
            default, latest = versions[spec["LaunchTemplateId"]]
            wanted = spec.get("Version") or "$Default"
            version = latest if wanted == "$Latest" else default if wanted == "$Default" else str(wanted)
        instances = tuple(
            InstanceFacts(
                instance_id=i["InstanceId"],
                availability_zone=i.get("AvailabilityZone", ""),
                lifecycle_state=i.get("LifecycleState", ""),
                launch_template_version=(
                    str(i["LaunchTemplate"]["Version"]) if (i.get("LaunchTemplate") or {}).get("Version") else None
                ),
                launch_time=times.get(i["InstanceId"]),
            )
            for i in asg.get("Instances", [])
        )
        out[group.name] = GroupFacts(
            name=group.name,
            role=group.role,
            instance_group=group.instance_group,
            min_size=int(asg["MinSize"]),
            max_size=int(asg["MaxSize"]),
            desired=int(asg["DesiredCapacity"]),
            instances=instances,
            launch_template_version=version,
        )
    return out
