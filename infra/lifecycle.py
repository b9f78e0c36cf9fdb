"""LifecycleHooks: the rules that bring termination lifecycle actions and EC2 state changes to the interruption
Lambda, and (optional) termination hooks on groups named in ``cdk.json``.

Which groups have the hook: every group tagged ``KubernetesCluster=<cluster>``, put there by the replenisher
(``lambdas/replenisher/hooks.py``, setting ``lifecycle_hooks``, default on) at its first invocation after the group
appears. kOps creates a group for a new instance group and deletes and creates a group again when it must replace
one; a hook belongs to its group and is deleted with it, so a list of names fixed at deploy time goes stale. What
follows the tag follows kOps. (kOps' InstanceGroup spec was not found to offer a termination hook of one's own
choosing; ``warmPool.enableLifecycleHook`` concerns warm pools. Not relied on either way.)

- One ``AWS::AutoScaling::LifecycleHook`` (``CfnLifecycleHook``) per group named in ``lifecycle_hook_groups``
  (optional; the same hook the replenisher puts, so the two agree): transition
  ``autoscaling:EC2_INSTANCE_TERMINATING``, default result ``CONTINUE`` (an agent that is down never blocks a
  termination for longer than the heartbeat timeout), no notification target (Auto Scaling sends every lifecycle
  action to EventBridge anyway). Such a group is hooked from the deploy on, and its hook is deleted with the stack.
- Rule "EC2 Instance-terminate Lifecycle Action" (source ``aws.autoscaling``), only for our hook's name (another
  tool's hook is not our business), for any group: the event names the group but not its tags, so the interruption
  Lambda reads the group's ``KubernetesCluster`` tag and acknowledges another cluster's action without acting
  (``lambdas.interruption.decide.common.out_of_scope``). Present whenever a hook can exist (``lifecycle_hooks`` or
  named groups).
- Rule "EC2 Instance State-change Notification" (source ``aws.ec2``), only states ``stopping``, ``shutting-down``,
  ``terminated``: stale membership is removed and queued commands cancelled.

Both target the interruption Lambda with the same retry policy and dead-letter queue as its other rules, and a
maximum event age that fits a drain started by a hook.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration, Stack
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from core.settings import InterruptionSettings

HOOK_NAME: str = InterruptionSettings.model_fields["lifecycle_hook_name"].default
TERMINATING = "autoscaling:EC2_INSTANCE_TERMINATING"
LIFECYCLE_ACTION = "EC2 Instance-terminate Lifecycle Action"
STATE_CHANGE = "EC2 Instance State-change Notification"
GOING_STATES = ("stopping", "shutting-down", "terminated")


class LifecycleHooks(Construct):
    """The hooks and the two rules (see the module docstring).

    Parameters:
        group_names: ASGs to hook at deploy time (kOps names: ``nodes-<az>.<cluster>``, ``master-<az>.masters...``).
        hooks_by_tag: the replenisher hooks every group of the cluster (``lifecycle_hooks``): the action rule is needed
            even without named groups.
        heartbeat_timeout_seconds: the hook's HeartbeatTimeout (30..7200); the agent records a heartbeat every
            ``LIFECYCLE_HEARTBEAT_SECONDS`` (60) while it drains, so keep this well above that.
        function: the interruption Lambda.
        dead_letter_queue: for events EventBridge could not deliver.
        retry_attempts, max_event_age_seconds: the targets' retry policy.

    Attributes:
        hooks (one per named group), lifecycle_rule (None when no hook can exist), state_change_rule.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        group_names: Sequence[str],
        hooks_by_tag: bool = True,
        heartbeat_timeout_seconds: int,
        function: lambda_.IFunction,
        dead_letter_queue: sqs.IQueue,
        retry_attempts: int,
        max_event_age_seconds: int,
    ) -> None:
        super().__init__(scope, construct_id)
        self.hooks = [
            autoscaling.CfnLifecycleHook(
                self,
                f"Hook{index}",
                auto_scaling_group_name=name,
                lifecycle_hook_name=HOOK_NAME,
                lifecycle_transition=TERMINATING,
                default_result="CONTINUE",
                heartbeat_timeout=heartbeat_timeout_seconds,
            )
            for index, name in enumerate(group_names)
        ]

        def target() -> targets.LambdaFunction:
            return targets.LambdaFunction(
                function,
                dead_letter_queue=dead_letter_queue,
                retry_attempts=retry_attempts,
                max_event_age=Duration.seconds(max_event_age_seconds),
            )

        self.lifecycle_rule: events.Rule | None = None
        if group_names or hooks_by_tag:
            self.lifecycle_rule = events.Rule(
                self,
                "LifecycleActionRule",
                description=f"{LIFECYCLE_ACTION} of hook {HOOK_NAME} -> interruption",
                event_pattern=events.EventPattern(
                    account=[Stack.of(self).account],  # events forwarded from another account are not ours
                    source=["aws.autoscaling"],
                    detail_type=[LIFECYCLE_ACTION],
                    detail={"LifecycleHookName": [HOOK_NAME]},
                ),
            )
            self.lifecycle_rule.add_target(target())
        self.state_change_rule = events.Rule(
            self,
            "StateChangeRule",
            description=f"{STATE_CHANGE} (going states) -> interruption",
            event_pattern=events.EventPattern(
                account=[Stack.of(self).account],
                source=["aws.ec2"],
                detail_type=[STATE_CHANGE],
                detail={"state": list(GOING_STATES)},
            ),
        )
        self.state_change_rule.add_target(target())
