"""NodeManagerStack: one cluster's deployment. It composes the units and grants between them, nothing more.

Units: ``StateStore`` (tables), ``CommandQueue`` (SQS), ``InterruptionHandler`` (Lambda + rules),
``ReplenisherHandler`` (Lambda + rules), ``RefresherHandler`` (Lambda + weekly, tick and event rules),
``AgentIdentity`` (the agent's role), and, with ``encryption: kms``, one customer managed key shared by them.
Later units (replenisher, refresher, lifecycle hooks, alarms) plug in the same way: a construct taking the
``code`` asset and its settings, and grants here.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_kms as kms
from constructs import Construct

from infra.agent import AgentIdentity
from infra.bundling import PROJECT_ROOT, DependencyCache, lambda_code
from infra.commands import CommandQueue
from infra.config import ClusterConfig, Encryption
from infra.interruption import InterruptionHandler
from infra.lifecycle import LifecycleHooks
from infra.operations import Operations, attach_put_metric_data
from infra.permissions import (
    attach_cluster_group_actions,
    attach_cluster_instance_terminate,
    attach_group_guard,
    attach_put_default_bus_events,
    attach_unscoped_describe,
)
from infra.refresher import AGENT_SOURCE as AGENT_EVENT_SOURCE
from infra.refresher import RefresherHandler
from infra.replenisher import ReplenisherHandler
from infra.state import StateStore

# What the interruption Lambda reads: instance -> ASG, the group's tags, the instance's tags and state.
INTERRUPTION_DESCRIBE_ACTIONS = (
    "autoscaling:DescribeAutoScalingInstances",
    "autoscaling:DescribeAutoScalingGroups",
    "ec2:DescribeInstances",
)
# Early replacement: detach the doomed instance without decrementing desired capacity, so its ASG launches the
# replacement now instead of after the reclaim.
INTERRUPTION_GROUP_ACTIONS = (
    "autoscaling:DetachInstances",
    # a hook for an instance drained moments ago is completed at once (no second drain)
    "autoscaling:CompleteLifecycleAction",
)
AGENT_DESCRIBE_ACTIONS = ("autoscaling:DescribeAutoScalingInstances",)
# The agent keeps a termination lifecycle action alive while it drains and completes it when the drain ends.
AGENT_GROUP_ACTIONS = ("autoscaling:CompleteLifecycleAction", "autoscaling:RecordLifecycleActionHeartbeat")
# What the replenisher reads: the cluster's groups with their instances, and launch times of unregistered ones.
# And each group's termination lifecycle hook (lambdas/replenisher/hooks.py).
REPLENISHER_DESCRIBE_ACTIONS = (
    "autoscaling:DescribeAutoScalingGroups",
    "ec2:DescribeInstances",
    "autoscaling:DescribeLifecycleHooks",
)
# Raise a donor (desired, MaxSize), give back by id (terminate with decrement), remove surplus/unregistered ones;
# put the termination hook on a group of the cluster that lacks it.
REPLENISHER_GROUP_ACTIONS = (
    "autoscaling:UpdateAutoScalingGroup",
    "autoscaling:TerminateInstanceInAutoScalingGroup",
    "autoscaling:PutLifecycleHook",
)

# What the refresher reads: the cluster's groups and instances, launch times, launch template versions.
REFRESHER_DESCRIBE_ACTIONS = (
    "autoscaling:DescribeAutoScalingGroups",
    "ec2:DescribeInstances",
    "ec2:DescribeLaunchTemplates",
)
# Surge (desired, MaxSize) and remove the old instance by id with decrement (or a master without).
REFRESHER_GROUP_ACTIONS = ("autoscaling:UpdateAutoScalingGroup", "autoscaling:TerminateInstanceInAutoScalingGroup")


class NodeManagerStack(Stack):
    """Everything node-manager needs in AWS for the cluster ``cluster.name``.

    Parameters:
        cluster: the validated settings of this cluster.
        project_root: where ``core/``, ``lambdas/`` and ``requirements.txt`` are (the Lambda asset's sources).
        dependency_cache: where the Lambda's pip installs are cached.
        **kwargs: ``Stack`` keyword arguments (``env``, ``stack_name``, ...).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: ClusterConfig,
        project_root: Path = PROJECT_ROOT,
        dependency_cache: DependencyCache | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)

        key = None
        if cluster.encryption is Encryption.KMS:
            key = kms.Key(
                self,
                "Key",
                enable_key_rotation=True,
                description=f"node-manager state and commands of cluster {cluster.name}",
            )

        state = StateStore(self, "State", encryption_key=key)
        commands = CommandQueue(self, "Commands", encryption_key=key)
        code = lambda_code(cluster.lambda_architecture, project_root, dependency_cache)

        interruption = InterruptionHandler(
            self,
            "Interruption",
            code=code,
            settings_environment=cluster.interruption_environment(
                table_name=state.table.table_name,
                queue_url=commands.queue.queue_url,
                idempotency_table_name=state.idempotency_table.table_name,
            ),
            architecture=cluster.lambda_architecture,
            log_retention_days=cluster.log_retention_days,
            log_level=cluster.log_level,
            reserved_concurrency=cluster.reserved_concurrency or None,
            tracing=cluster.tracing,
            event_retry_attempts=cluster.event_retry_attempts,
            event_max_age_seconds=cluster.event_max_age_seconds,
            encryption_key=key,
        )
        state.grant_store_access(interruption.role)
        state.grant_idempotency_access(interruption.role)
        commands.grant_send(interruption.role)
        for policy in (
            attach_unscoped_describe(interruption, "DescribePolicy", interruption.role, INTERRUPTION_DESCRIBE_ACTIONS),
            attach_cluster_group_actions(
                interruption,
                "ClusterGroupsPolicy",
                interruption.role,
                cluster_name=cluster.name,
                actions=INTERRUPTION_GROUP_ACTIONS,
            ),
        ):
            interruption.function.node.add_dependency(policy)  # no invocation before its permissions exist

        replenisher = ReplenisherHandler(
            self,
            "Replenisher",
            code=code,
            cluster_name=cluster.name,
            settings_environment=cluster.replenisher_environment(
                table_name=state.table.table_name, queue_url=commands.queue.queue_url
            ),
            architecture=cluster.lambda_architecture,
            log_retention_days=cluster.log_retention_days,
            log_level=cluster.log_level,
            tracing=cluster.tracing,
            event_retry_attempts=cluster.event_retry_attempts,
            encryption_key=key,
        )
        _grant_capacity_operation(
            replenisher,
            state,
            commands,
            cluster.name,
            REPLENISHER_DESCRIBE_ACTIONS,
            REPLENISHER_GROUP_ACTIONS,
            max_group_size=cluster.max_group_size,
        )
        # instances detached for early replacement and left running (DETACH#) are terminated by the replenisher
        replenisher.function.node.add_dependency(
            attach_cluster_instance_terminate(
                replenisher, "TerminateDetachedPolicy", replenisher.role, cluster_name=cluster.name
            )
        )

        refresher = RefresherHandler(
            self,
            "Refresher",
            code=code,
            cluster_name=cluster.name,
            settings_environment=cluster.refresher_environment(
                table_name=state.table.table_name, queue_url=commands.queue.queue_url
            ),
            schedule_expression=cluster.refresh_schedule,
            tick_minutes=cluster.refresh_tick_minutes,
            architecture=cluster.lambda_architecture,
            log_retention_days=cluster.log_retention_days,
            log_level=cluster.log_level,
            tracing=cluster.tracing,
            event_retry_attempts=cluster.event_retry_attempts,
            encryption_key=key,
        )
        _grant_capacity_operation(
            refresher,
            state,
            commands,
            cluster.name,
            REFRESHER_DESCRIBE_ACTIONS,
            REFRESHER_GROUP_ACTIONS,
            max_group_size=cluster.max_group_size,
        )

        commands.restrict_senders([interruption.role, replenisher.role, refresher.role])

        agent = AgentIdentity(
            self,
            "Agent",
            oidc_provider_arn=cluster.agent_oidc_provider_arn,
            oidc_issuer=cluster.oidc_issuer,
            service_account=cluster.agent_service_account,
            existing_role_arn=cluster.agent_role_arn,
            audience=cluster.irsa_audience,
        )
        commands.grant_consume(agent.role)
        state.grant_agent_access(agent.role, cluster.name)
        attach_put_default_bus_events(agent, "EventsPolicy", agent.role, source=AGENT_EVENT_SOURCE)
        attach_unscoped_describe(agent, "DescribePolicy", agent.role, AGENT_DESCRIBE_ACTIONS)
        attach_cluster_group_actions(
            agent, "LifecycleHooksPolicy", agent.role, cluster_name=cluster.name, actions=AGENT_GROUP_ACTIONS
        )
        attach_put_metric_data(agent, "MetricsPolicy", agent.role)

        # issue 5: termination hooks + state changes to the interruption Lambda; dashboard and alarms
        self.lifecycle = LifecycleHooks(
            self,
            "Lifecycle",
            group_names=cluster.lifecycle_hook_groups,
            hooks_by_tag=cluster.lifecycle_hooks,
            heartbeat_timeout_seconds=cluster.lifecycle_hook_heartbeat_seconds,
            function=interruption.function,
            dead_letter_queue=interruption.dead_letter_queue,
            retry_attempts=cluster.event_retry_attempts,
            max_event_age_seconds=3600,
        )
        self.operations = Operations(
            self,
            "Operations",
            cluster_name=cluster.name,
            dead_letter_queues={
                "Commands": commands.dead_letter_queue,
                "InterruptionEvents": interruption.dead_letter_queue,
                "ReplenisherEvents": replenisher.dead_letter_queue,
                "RefresherEvents": refresher.dead_letter_queue,
            },
            functions={
                "Interruption": interruption.function,
                "Replenisher": replenisher.function,
                "Refresher": refresher.function,
            },
            lock_alarm_seconds=cluster.lock_alarm_seconds,
            agent_silent_minutes=cluster.agent_silent_minutes,
            alarm_topic_arn=cluster.alarm_topic_arn,
            create_alarm_topic=cluster.create_alarm_topic,
            encryption_key=key,
        )

        self.state, self.commands, self.interruption, self.agent = state, commands, interruption, agent
        self.replenisher = replenisher
        self.refresher = refresher
        CfnOutput(
            self,
            "AgentRoleArn",
            value=agent.role.role_arn,
            description="IAM role of the agent (service account annotation eks.amazonaws.com/role-arn)",
        )
        CfnOutput(self, "CommandQueueUrl", value=commands.queue.queue_url, description="QUEUE_URL of the agent")
        CfnOutput(self, "StateTableName", value=state.table.table_name, description="TABLE_NAME of the agent")
        CfnOutput(self, "InterruptionFunctionName", value=interruption.function.function_name)
        CfnOutput(self, "ReplenisherFunctionName", value=replenisher.function.function_name)
        CfnOutput(
            self,
            "RefresherFunctionName",
            value=refresher.function.function_name,
            description="python -m cli --function-name <this> refresh|status|cancel",
        )
        CfnOutput(
            self,
            "RefresherOperatorRoleArn",
            value=refresher.operator_role.role_arn,
            description="the role to assume for manual refresh, status and cancel (lambda:InvokeFunction on the "
            "refresher only)",
        )


def _grant_capacity_operation(
    unit: Any,
    state: Any,
    commands: Any,
    cluster_name: str,
    describe_actions: Sequence[str],
    group_actions: Sequence[str],
    *,
    max_group_size: int,
) -> None:
    """What a capacity Lambda (replenisher, refresher) may do: read and write the state table, send commands to the
    agent, the Describe calls that allow no resource scoping, and ``group_actions`` only on the cluster's ASGs,
    never a MaxSize above ``max_group_size`` nor a field kOps owns (``attach_group_guard``).
    The function depends on its policies, so it never runs before they exist."""
    state.grant_store_access(unit.role)
    commands.grant_send(unit.role)
    for policy in (
        attach_unscoped_describe(unit, "DescribePolicy", unit.role, describe_actions),
        attach_cluster_group_actions(
            unit, "ClusterGroupsPolicy", unit.role, cluster_name=cluster_name, actions=group_actions
        ),
        attach_group_guard(unit, "GroupGuardPolicy", unit.role, max_group_size=max_group_size),
    ):
        unit.function.node.add_dependency(policy)
