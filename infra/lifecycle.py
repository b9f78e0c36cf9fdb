"""LifecycleHooks: termination lifecycle hooks on the managed ASGs, and the rules that bring their actions and EC2
state changes to the interruption Lambda.

- One ``AWS::AutoScaling::LifecycleHook`` (``CfnLifecycleHook``) per group named in ``lifecycle_hook_groups``
  (setting): transition ``autoscaling:EC2_INSTANCE_TERMINATING``, default result ``CONTINUE`` (an agent that is
  down never blocks a termination for longer than the heartbeat timeout), no notification target (Auto Scaling
  sends every lifecycle action to EventBridge anyway). Why this resource and not an ``AwsCustomResource`` calling
  PutLifecycleHook: kOps owns the groups, so CDK cannot model them (``AutoScalingGroup.from...`` imports give no
  hook method), but CloudFormation's LifecycleHook resource takes any existing group *by name*, is created,
  updated and deleted with the stack, and needs no Lambda of its own. kOps does not remove hooks it did not create;
  a group that kOps re-creates under the same name loses its hook until the next ``cdk deploy``, one renamed
  needs its new name in the setting.
- Rule "EC2 Instance-terminate Lifecycle Action" (source ``aws.autoscaling``), only for our hook's name (another
  tool's hook is not our business).
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
        group_names: the managed ASGs to hook (kOps names: ``nodes-<az>.<cluster>``, ``master-<az>.masters...``).
        heartbeat_timeout_seconds: the hook's HeartbeatTimeout (30..7200); the agent records a heartbeat every
            ``LIFECYCLE_HEARTBEAT_SECONDS`` (60) while it drains, so keep this well above that.
        function: the interruption Lambda.
        dead_letter_queue: for events EventBridge could not deliver.
        retry_attempts, max_event_age_seconds: the targets' retry policy.

    Attributes:
        hooks (one per group), lifecycle_rule (None without groups), state_change_rule.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        group_names: Sequence[str],
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
        if group_names:
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
