"""Auto Scaling: the cluster's groups, an instance's group, capacity, termination, detaching, lifecycle actions.

Thin: no decisions. Errors are translated by ``adapters.aws.calls`` (``AwsUnavailableError``: retryable;
``AwsRequestError``: not), raised ``from`` the botocore error. Answers that mean "the target is gone already" (an
instance no longer in its group, a lifecycle action no longer active) are results, not errors, so a redo after a
crash is harmless.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from adapters.aws.calls import call, call_unless_gone
from adapters.aws.ports import Membership
from core.kops import CLUSTER_TAG
from core.lifecycle import LifecycleAction

DESCRIBE_GROUPS_PAGE = 100  # DescribeAutoScalingGroups' maximum MaxRecords
DESCRIBE_INSTANCES_MAX_IDS = 50  # DescribeAutoScalingInstances' maximum InstanceIds (and MaxRecords)
# ValidationError messages (lower case fragments) of TerminateInstanceInAutoScalingGroup / DetachInstances for an
# instance Auto Scaling no longer has.
NOT_IN_GROUP = ("not found", "not part of")
NO_ACTIVE_ACTION = "No active Lifecycle Action"
TERMINATING = "autoscaling:EC2_INSTANCE_TERMINATING"  # PutLifecycleHook's LifecycleTransition of a termination hook


def _not_in_group(code: str, message: str) -> bool:
    return code == "ValidationError" and any(m in message.lower() for m in NOT_IN_GROUP)


def _action_gone(code: str, message: str) -> bool:
    return code == "ValidationError" and NO_ACTIVE_ACTION in message


class AutoScaling:
    """Auto Scaling calls.

    Args:
        client: a boto3 ``autoscaling`` client (or an ``adapters.aws.clients.LazyClient``).
        lifecycle_client: the client CompleteLifecycleAction and RecordLifecycleActionHeartbeat go through (default
            ``client``; tests pass one wrapped in botocore's Stubber, moto lacks these calls).
    """

    def __init__(self, client: Any, lifecycle_client: Any = None) -> None:
        self.client = client
        self.lifecycle_client = lifecycle_client or client

    # -- look-ups ------------------------------------------------------------------------------------------

    def cluster_groups(self, cluster: str) -> list[dict[str, Any]]:
        """Every ASG tagged ``KubernetesCluster=<cluster>``, with ``Instances`` and ``Tags``: DescribeAutoScalingGroups
        with a tag filter, 100 groups a call, following ``NextToken``.

        Raises:
            AwsUnavailableError, AwsRequestError.
        """
        groups: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {
            "Filters": [{"Name": f"tag:{CLUSTER_TAG}", "Values": [cluster]}],
            "MaxRecords": DESCRIBE_GROUPS_PAGE,
        }
        while True:
            out = call("DescribeAutoScalingGroups", self.client.describe_auto_scaling_groups, **kwargs)
            groups.extend(out.get("AutoScalingGroups", []))
            token = out.get("NextToken")
            if not token:
                return groups
            kwargs["NextToken"] = token

    def describe_group(self, asg_name: str) -> dict[str, Any] | None:
        """One DescribeAutoScalingGroups call: the group (with ``Tags`` and ``Instances``), or None if it does not
        exist."""
        out = call(
            "DescribeAutoScalingGroups", self.client.describe_auto_scaling_groups, AutoScalingGroupNames=[asg_name]
        )
        groups = out.get("AutoScalingGroups", [])
        return dict(groups[0]) if groups else None

    def membership(self, instance_id: str) -> Membership | None:
        """One DescribeAutoScalingInstances call: the instance's group and lifecycle state, None when it is in no
        group."""
        out = call(
            "DescribeAutoScalingInstances", self.client.describe_auto_scaling_instances, InstanceIds=[instance_id]
        )
        for member in out.get("AutoScalingInstances", []):
            if member.get("InstanceId") == instance_id:
                return Membership(str(member["AutoScalingGroupName"]), str(member.get("LifecycleState", "")))
        return None

    def group_names(self, instance_ids: Iterable[str]) -> dict[str, str]:
        """Instance id -> its group's name, for the instances in a group (others are absent):
        DescribeAutoScalingInstances, 50 ids a call."""
        ids = list(instance_ids)
        found: dict[str, str] = {}
        for start in range(0, len(ids), DESCRIBE_INSTANCES_MAX_IDS):
            batch = ids[start : start + DESCRIBE_INSTANCES_MAX_IDS]
            out = call(
                "DescribeAutoScalingInstances",
                self.client.describe_auto_scaling_instances,
                InstanceIds=batch,
                MaxRecords=DESCRIBE_INSTANCES_MAX_IDS,
            )
            for entry in out.get("AutoScalingInstances", []):
                found[str(entry["InstanceId"])] = str(entry["AutoScalingGroupName"])
        return found

    def lifecycle_hook(self, asg_name: str, hook_name: str) -> dict[str, Any] | None:
        """One DescribeLifecycleHooks call: the group's hook named ``hook_name`` (``LifecycleTransition``,
        ``HeartbeatTimeout``, ``DefaultResult``, ...), or None when the group has none of that name.

        Raises:
            AwsUnavailableError, AwsRequestError (``ValidationError`` when the group does not exist).
        """
        out = call(
            "DescribeLifecycleHooks",
            self.client.describe_lifecycle_hooks,
            AutoScalingGroupName=asg_name,
            LifecycleHookNames=[hook_name],
        )
        for hook in out.get("LifecycleHooks", []):
            if hook.get("LifecycleHookName") == hook_name:
                return dict(hook)
        return None

    # -- effects -------------------------------------------------------------------------------------------

    def set_capacity(self, asg_name: str, desired: int | None, max_size: int | None) -> None:
        """UpdateAutoScalingGroup with the given absolute DesiredCapacity and/or MaxSize (idempotent; MaxSize first
        in effect: one call carries both, so a desired above the old MaxSize is accepted).

        Raises:
            AwsUnavailableError, AwsRequestError (e.g. ``ValidationError`` when MaxSize < desired).
        """
        kwargs: dict[str, Any] = {"AutoScalingGroupName": asg_name}
        if desired is not None:
            kwargs["DesiredCapacity"] = desired
        if max_size is not None:
            kwargs["MaxSize"] = max_size
        call("UpdateAutoScalingGroup", self.client.update_auto_scaling_group, **kwargs)

    def terminate_in_group(self, instance_id: str, decrement: bool) -> bool:
        """TerminateInstanceInAutoScalingGroup.

        Returns:
            True when asked; False when Auto Scaling no longer has the instance (already terminated or detached,
            e.g. by an invocation that crashed before recording it).

        Raises:
            AwsUnavailableError, AwsRequestError.
        """
        out = call_unless_gone(
            "TerminateInstanceInAutoScalingGroup",
            self.client.terminate_instance_in_auto_scaling_group,
            _not_in_group,
            InstanceId=instance_id,
            ShouldDecrementDesiredCapacity=decrement,
        )
        return out is not None

    def detach_instance(self, instance_id: str, asg_name: str) -> bool:
        """DetachInstances with ShouldDecrementDesiredCapacity=False, so the ASG launches a replacement now.

        Returns:
            True when detached; False when Auto Scaling says the instance is not part of the group (already
            detached, e.g. by an earlier attempt that crashed before recording it).

        Raises:
            AwsUnavailableError, AwsRequestError.
        """
        out = call_unless_gone(
            "DetachInstances",
            self.client.detach_instances,
            _not_in_group,
            InstanceIds=[instance_id],
            AutoScalingGroupName=asg_name,
            ShouldDecrementDesiredCapacity=False,
        )
        return out is not None

    def put_termination_hook(self, asg_name: str, hook_name: str, heartbeat_seconds: int) -> None:
        """PutLifecycleHook: creates or updates the group's termination hook ``hook_name`` (transition
        ``autoscaling:EC2_INSTANCE_TERMINATING``, HeartbeatTimeout ``heartbeat_seconds`` (30..7200), DefaultResult
        ``CONTINUE``: nobody completing the action delays a termination by the timeout, never blocks it). Idempotent.

        Raises:
            AwsUnavailableError, AwsRequestError (``ValidationError`` when the group does not exist).
        """
        call(
            "PutLifecycleHook",
            self.client.put_lifecycle_hook,
            LifecycleHookName=hook_name,
            AutoScalingGroupName=asg_name,
            LifecycleTransition=TERMINATING,
            HeartbeatTimeout=heartbeat_seconds,
            DefaultResult="CONTINUE",
        )

    def complete_lifecycle_action(self, action: LifecycleAction) -> bool:
        """CompleteLifecycleAction with ``CONTINUE`` (the instance may terminate now).

        Returns:
            True when Auto Scaling accepted it; False when it no longer knows the action (ValidationError "No
            active Lifecycle Action": it timed out or someone else completed it).

        Raises:
            AwsUnavailableError, AwsRequestError.
        """
        out = call_unless_gone(
            "CompleteLifecycleAction",
            self.lifecycle_client.complete_lifecycle_action,
            _action_gone,
            LifecycleHookName=action.hook_name,
            AutoScalingGroupName=action.asg_name,
            LifecycleActionToken=action.token,
            LifecycleActionResult="CONTINUE",
            InstanceId=action.instance_id,
        )
        return out is not None

    def record_heartbeat(self, action: LifecycleAction) -> bool:
        """RecordLifecycleActionHeartbeat: the action's heartbeat timeout starts again.

        Returns:
            True when recorded; False when Auto Scaling no longer knows the action.

        Raises:
            AwsUnavailableError, AwsRequestError.
        """
        out = call_unless_gone(
            "RecordLifecycleActionHeartbeat",
            self.lifecycle_client.record_lifecycle_action_heartbeat,
            _action_gone,
            LifecycleHookName=action.hook_name,
            AutoScalingGroupName=action.asg_name,
            LifecycleActionToken=action.token,
            InstanceId=action.instance_id,
        )
        return out is not None
