"""The refresher's only AWS adapter: Auto Scaling, EC2 and SQS calls. Thin: no decisions.

botocore errors become ``core.exceptions`` types raised ``from`` the botocore error (``AwsUnavailableError``:
retryable; ``AwsRequestError``: not), through ``lambdas.common.aws``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from core.kops import managed_group
from lambdas.common import aws as common
from lambdas.refresher.world import GroupFacts, InstanceFacts

DESCRIBE_INSTANCES_BATCH = 100


def _template_spec(asg: dict[str, Any]) -> dict[str, Any] | None:
    """The group's launch template specification: ``LaunchTemplate`` or the MixedInstancesPolicy's."""
    if asg.get("LaunchTemplate"):
        return dict(asg["LaunchTemplate"])
    policy = asg.get("MixedInstancesPolicy") or {}
    spec = (policy.get("LaunchTemplate") or {}).get("LaunchTemplateSpecification")
    return dict(spec) if spec else None


class RefresherAws(common.LambdaAws):
    """AWS calls of the refresher (``send_command`` is ``lambdas.common.aws.LambdaAws``'s).

    Args:
        autoscaling, ec2, sqs: boto3 clients (built by the entry point).
        queue_url: the agent's command queue.
    """

    # -- look-ups ------------------------------------------------------------------------------------------

    def describe_groups(self, cluster: str) -> list[dict[str, Any]]:
        """DescribeAutoScalingGroups filtered on ``KubernetesCluster=<cluster>`` (paginated, 100 per call)."""
        return common.cluster_groups(self.autoscaling, cluster)

    def launch_times(self, instance_ids: list[str]) -> dict[str, datetime]:
        """DescribeInstances ``LaunchTime`` per instance (batches of 100 ids)."""
        times: dict[str, datetime] = {}
        for start in range(0, len(instance_ids), DESCRIBE_INSTANCES_BATCH):
            batch = instance_ids[start : start + DESCRIBE_INSTANCES_BATCH]
            out = common.call("DescribeInstances", self.ec2.describe_instances, InstanceIds=batch)
            for reservation in out.get("Reservations", []):
                for inst in reservation.get("Instances", []):
                    times[inst["InstanceId"]] = inst["LaunchTime"]
        return times

    def template_versions(self, template_ids: list[str]) -> dict[str, tuple[str, str]]:
        """DescribeLaunchTemplates: template id -> (default version, latest version), as strings."""
        if not template_ids:
            return {}
        out = common.call(
            "DescribeLaunchTemplates", self.ec2.describe_launch_templates, LaunchTemplateIds=sorted(set(template_ids))
        )
        return {
            t["LaunchTemplateId"]: (str(t["DefaultVersionNumber"]), str(t["LatestVersionNumber"]))
            for t in out.get("LaunchTemplates", [])
        }

    def groups(self, cluster: str, *, with_launch_facts: bool = False) -> dict[str, GroupFacts]:
        """The cluster's managed groups as ``GroupFacts``.

        Calls: DescribeAutoScalingGroups (1 per 100 groups); with ``with_launch_facts`` also DescribeInstances
        (1 per 100 instances, for launch times) and DescribeLaunchTemplates (1, to resolve ``$Latest`` and
        ``$Default`` to version numbers).
        """
        raw = self.describe_groups(cluster)
        versions: dict[str, tuple[str, str]] = {}
        times: dict[str, datetime] = {}
        if with_launch_facts:
            ids = [
                spec["LaunchTemplateId"]
                for spec in (_template_spec(g) for g in raw)
                if spec and spec.get("LaunchTemplateId")
            ]
            versions = self.template_versions(ids)
            times = self.launch_times([i["InstanceId"] for g in raw for i in g.get("Instances", [])])
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

    # -- effects -------------------------------------------------------------------------------------------

    def set_capacity(self, asg_name: str, desired: int | None, max_size: int | None) -> None:
        """UpdateAutoScalingGroup with absolute DesiredCapacity and/or MaxSize (idempotent)."""
        common.set_capacity(self.autoscaling, asg_name, desired, max_size)

    def terminate_in_group(self, instance_id: str, decrement: bool) -> bool:
        """TerminateInstanceInAutoScalingGroup.

        Returns:
            True when asked; False when Auto Scaling no longer has the instance (already terminated or detached,
            e.g. by an invocation that crashed before recording it).
        """
        return common.terminate_in_group(self.autoscaling, instance_id, decrement, ("not found", "not part of"))
