"""In-memory Auto Scaling behind ``adapters.aws.ports.AutoScalingPort``: the answers ``adapters.aws.autoscaling
.AutoScaling`` gives (the dicts of DescribeAutoScalingGroups as it passes them on, ``Membership``, booleans for "the
target is gone already") and the exceptions it raises.

Rules as AWS applies them (EC2 Auto Scaling API Reference; ``localworld.aws_rules`` lists where moto is laxer):

- UpdateAutoScalingGroup: a DesiredCapacity outside [MinSize, MaxSize] after the call's own sizes is refused
  (``ValidationError`` "Desired capacity:<d> must be between the specified min size:<min> and max size:<max>"); a
  new MaxSize below the current desired capacity without a DesiredCapacity lowers the desired capacity to it ("If you
  specify a new value for MaxSize without specifying a value for DesiredCapacity, and the new MaxSize is smaller
  than the current size of the group, this sets the group's DesiredCapacity to the new MaxSize value"); an unknown
  group answers "AutoScalingGroup name not found - null".
- TerminateInstanceInAutoScalingGroup: an id no group holds answers "Instance Id not found - No managed instance
  found for instance ID <id>" (the adapter's False); ShouldDecrementDesiredCapacity at MinSize is refused
  ("Currently, desiredSize equals minSize (<n>). ..."). An instance already terminating is accepted and unchanged
  (not decremented twice; AWS's documentation does not say, an assumption).
- DetachInstances: at most 20 ids; an id not in the group answers "The instance <id> is not part of Auto Scaling group
  <name>." and an unknown group "AutoScalingGroup name not found - ..." (both the adapter's False); a decrement below
  MinSize is refused; an instance not ``InService`` or ``Standby`` is refused ("The instance <id> is not in InService
  or Standby.", "Amazon EC2 Auto Scaling instance lifecycle", Detach).
- DescribeAutoScalingGroups: 100 groups a call (``cluster_groups`` pays one call per 100);
  DescribeAutoScalingInstances: 50 ids a call.
- CompleteLifecycleAction / RecordLifecycleActionHeartbeat: an action no longer active (completed, timed out, the
  instance gone) answers "No active Lifecycle Action found with instance ID <id>" (the adapter's False).

Each call first asks ``faults.check("autoscaling", <operation>)`` and raises what the adapter raises for that code;
an effect, once made, asks ``faults.check("autoscaling:lost-answer", <operation>)`` (``sim.aws_common
.check_lost_answer``: done, but the caller sees a failure).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import compress, repeat
from operator import is_not
from typing import Any, cast

from adapters.aws.autoscaling import DESCRIBE_GROUPS_PAGE, DESCRIBE_INSTANCES_MAX_IDS
from adapters.aws.ports import Membership
from core.kops import CLUSTER_TAG
from core.lifecycle import LifecycleAction
from sim.aws_common import check_fault, check_lost_answer, refuse
from sim.aws_state import TerminationHook
from sim.cloud import Cloud
from sim.faults import Faults

DETACH_OK_STATES = ("InService", "Standby")


class SimAutoScaling:
    """The Auto Scaling port over a ``Cloud``.

    Args:
        cloud: the simulated account.
        faults: the run's fault windows (service ``autoscaling``).
    """

    def __init__(self, cloud: Cloud, faults: Faults) -> None:
        self.cloud = cloud
        self.faults = faults
        self.calls: dict[str, int] = {}
        # told (group, instances scaled in) when a size change through this port leaves a group more instances than
        # its desired capacity: Auto Scaling terminates instances of its own choosing (the world's checker listens)
        self.scaled_in: list[Callable[[str, int], None]] = []

    def _call(self, operation: str) -> None:
        self.calls[operation] = self.calls.get(operation, 0) + 1
        check_fault(self.faults, "autoscaling", operation)

    def _answered(self, operation: str) -> None:
        check_lost_answer(self.faults, "autoscaling", operation)

    # -- look-ups --------------------------------------------------------------------------------------------
    def cluster_groups(self, cluster: str) -> list[dict[str, Any]]:
        """Every group tagged ``KubernetesCluster=<cluster>`` (by name, as AWS lists them), with ``Instances`` and
        ``Tags``; one DescribeAutoScalingGroups call per 100 groups.

        Raises:
            AwsUnavailableError, AwsRequestError.
        """
        names = sorted(n for n, g in self.cloud.groups.items() if g.tags.get(CLUSTER_TAG) == cluster)
        out: list[dict[str, Any]] = []
        for start in range(0, max(1, len(names)), DESCRIBE_GROUPS_PAGE):
            self._call("DescribeAutoScalingGroups")
            out.extend(
                self.cloud.groups[n].describe(self.cloud.region, self.cloud.account)
                for n in names[start : start + DESCRIBE_GROUPS_PAGE]
            )
        return out

    def describe_group(self, asg_name: str) -> dict[str, Any] | None:
        """The group (with ``Tags`` and ``Instances``), None when it does not exist.

        Raises:
            AwsUnavailableError, AwsRequestError.
        """
        self._call("DescribeAutoScalingGroups")
        group = self.cloud.groups.get(asg_name)
        return None if group is None else group.describe(self.cloud.region, self.cloud.account)

    def lifecycle_hook(self, asg_name: str, hook_name: str) -> dict[str, Any] | None:
        """DescribeLifecycleHooks for one hook name: its fields as Auto Scaling answers them, None when the group has
        none of that name ("DescribeLifecycleHooks", Auto Scaling API reference).

        Raises:
            AwsUnavailableError, AwsRequestError (``ValidationError`` when the group does not exist).
        """
        self._call("DescribeLifecycleHooks")
        group = self.cloud.groups.get(asg_name)
        if group is None:
            refuse("DescribeLifecycleHooks", "ValidationError", f"AutoScalingGroup name not found - {asg_name}")
        for hook in group.hooks:
            if hook.name == hook_name:
                return {
                    "LifecycleHookName": hook.name,
                    "AutoScalingGroupName": asg_name,
                    "LifecycleTransition": "autoscaling:EC2_INSTANCE_TERMINATING",
                    "HeartbeatTimeout": hook.heartbeat_timeout,
                    "GlobalTimeout": hook.global_timeout,
                    "DefaultResult": hook.default_result,
                }
        return None

    def put_termination_hook(self, asg_name: str, hook_name: str, heartbeat_seconds: int) -> None:
        """PutLifecycleHook for a termination hook (creates or replaces the hook of that name; DefaultResult
        ``CONTINUE``); "PutLifecycleHook", Auto Scaling API reference.

        Raises:
            AwsUnavailableError, AwsRequestError (``ValidationError`` when the group does not exist).
        """
        self._call("PutLifecycleHook")
        group = self.cloud.groups.get(asg_name)
        if group is None:
            refuse("PutLifecycleHook", "ValidationError", f"AutoScalingGroup name not found - {asg_name}")
        hook = TerminationHook(hook_name, heartbeat_seconds, "CONTINUE")
        group.hooks = (*(h for h in group.hooks if h.name != hook_name), hook)
        self.cloud.touch(group)
        self._answered("PutLifecycleHook")

    def membership(self, instance_id: str) -> Membership | None:
        """The instance's group and lifecycle state, None when no group holds it.

        Raises:
            AwsUnavailableError, AwsRequestError.
        """
        self._call("DescribeAutoScalingInstances")
        inst = self.cloud.instances.get(instance_id)
        if inst is None or inst.group is None:
            return None
        return Membership(inst.group, inst.lifecycle_state)

    def group_names(self, instance_ids: Iterable[str]) -> dict[str, str]:
        """Instance id -> its group, for the ids a group holds; one DescribeAutoScalingInstances call per 50 ids.

        Raises:
            AwsUnavailableError, AwsRequestError.
        """
        ids = list(instance_ids)
        found: dict[str, str] = {}
        for start in range(0, len(ids), DESCRIBE_INSTANCES_MAX_IDS):
            self._call("DescribeAutoScalingInstances")
            instances = self.cloud.instances  # per batch: read after its call, as before
            batch = ids[start : start + DESCRIBE_INSTANCES_MAX_IDS]
            groups: list[str | None] = list(map(getattr, map(instances.get, batch), repeat("group"), repeat(None)))
            held = map(is_not, groups, repeat(None))  # an unknown instance (None) or one in no group: not answered
            found.update(cast(Iterable[tuple[str, str]], compress(zip(batch, groups, strict=True), held)))
        return found

    # -- effects ---------------------------------------------------------------------------------------------
    def set_capacity(self, asg_name: str, desired: int | None, max_size: int | None) -> None:
        """UpdateAutoScalingGroup with an absolute DesiredCapacity and/or MaxSize.

        Raises:
            AwsUnavailableError; AwsRequestError ``ValidationError``: unknown group, desired outside the sizes,
            MaxSize below MinSize.
        """
        operation = "UpdateAutoScalingGroup"
        self._call(operation)
        group = self.cloud.groups.get(asg_name)
        if group is None:
            refuse(operation, "ValidationError", "AutoScalingGroup name not found - null")
        new_max = group.max_size if max_size is None else max_size
        if new_max < group.min_size:
            refuse(
                operation,
                "ValidationError",
                f"Max bound, {new_max}, must be greater than or equal to min bound, {group.min_size}",
            )
        if desired is None:
            desired = min(group.desired, new_max)
        elif not group.min_size <= desired <= new_max:
            refuse(
                operation,
                "ValidationError",
                f"Desired capacity:{desired} must be between the specified min size:{group.min_size} and max "
                f"size:{new_max}",
            )
        before = group.desired
        self.cloud.set_sizes(asg_name, group.min_size, new_max, desired)
        extra = len(group.active()) - desired  # "an implied change to DesiredCapacity" when MaxSize goes below it
        if desired < before and extra > 0:
            for observer in self.scaled_in:
                observer(asg_name, min(extra, before - desired))
        self._answered(operation)

    def terminate_in_group(self, instance_id: str, decrement: bool) -> bool:
        """TerminateInstanceInAutoScalingGroup.

        Returns:
            True when asked; False when no group holds the instance.

        Raises:
            AwsUnavailableError; AwsRequestError ``ValidationError`` for a decrement at MinSize.
        """
        operation = "TerminateInstanceInAutoScalingGroup"
        self._call(operation)
        inst = self.cloud.instances.get(instance_id)
        if inst is None or inst.group is None:
            return False  # "Instance Id not found - No managed instance found for instance ID <id>"
        group = self.cloud.groups[inst.group]
        if decrement and group.desired <= group.min_size:
            refuse(
                operation,
                "ValidationError",
                f"Currently, desiredSize equals minSize ({group.min_size}). Terminating instance without replacement "
                "will violate group's min size constraint. Either set shouldDecrementDesiredCapacity flag to false "
                "or lower group's min size.",
            )
        self.cloud.terminate_in_group(instance_id, decrement)
        self._answered(operation)
        return True

    def detach_instance(self, instance_id: str, asg_name: str) -> bool:
        """DetachInstances with ShouldDecrementDesiredCapacity=False (the group launches a replacement).

        Returns:
            True when detached; False when the instance is not part of the group (or the group does not exist).

        Raises:
            AwsUnavailableError; AwsRequestError ``ValidationError`` for an instance not InService or Standby.
        """
        operation = "DetachInstances"
        self._call(operation)
        group = self.cloud.groups.get(asg_name)
        inst = None if group is None else group.members.get(instance_id)
        if inst is None:
            # "The instance <id> is not part of Auto Scaling group <name>." or, for an unknown group,
            # "AutoScalingGroup name not found - ...": both "not ..." answers the adapter reads as gone.
            return False
        if inst.lifecycle_state not in DETACH_OK_STATES:
            refuse(operation, "ValidationError", f"The instance {instance_id} is not in InService or Standby.")
        self.cloud.detach(instance_id, decrement=False)
        self._answered(operation)
        return True

    def complete_lifecycle_action(self, action: LifecycleAction) -> bool:
        """CompleteLifecycleAction with CONTINUE.

        Returns:
            True when accepted; False when the action is no longer active.

        Raises:
            AwsUnavailableError, AwsRequestError.
        """
        self._call("CompleteLifecycleAction")
        inst = self.cloud.active_wait(action.asg_name, action.hook_name, action.token, action.instance_id)
        if inst is None:
            return False  # "No active Lifecycle Action found with instance ID <id>"
        self.cloud.complete(inst)
        self._answered("CompleteLifecycleAction")
        return True

    def record_heartbeat(self, action: LifecycleAction) -> bool:
        """RecordLifecycleActionHeartbeat.

        Returns:
            True when recorded; False when the action is no longer active.

        Raises:
            AwsUnavailableError, AwsRequestError.
        """
        self._call("RecordLifecycleActionHeartbeat")
        inst = self.cloud.active_wait(action.asg_name, action.hook_name, action.token, action.instance_id)
        if inst is None:
            return False
        self.cloud.heartbeat(inst)
        self._answered("RecordLifecycleActionHeartbeat")
        return True
