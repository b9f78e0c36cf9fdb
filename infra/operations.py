"""Operations: the CloudWatch dashboard and alarms of one cluster's deployment, with an optional SNS topic.

Alarms (each one a stack output, ``<Name>AlarmName``; what each means and what to do: README, "Operations"):

- ``DeadLetter<queue>``: a dead-letter queue holds a message (``ApproximateNumberOfMessagesVisible`` > 0): a
  command the agent could not take (after 3 receives), or an event EventBridge could not deliver to a Lambda.
- ``DrainFailures``: a drain ended ``failed`` or ``timed_out`` (``NodeManager/DrainFailures``, published by the
  agent, agent/cloudwatch.py).
- ``LockHeldTooLong``: the cluster lock has been held past ``lock_alarm_seconds`` by one holder
  (``NodeManager/LockHeldSeconds``, service ``replenisher``: the lock's age as each replenisher invocation reads it,
  at least every tick; the agent's role reads nothing of the cluster partition).
- ``AgentSilent``: no membership report for ``agent_silent_minutes`` (``NodeManager/AgentMembershipReports``: the
  leading agent publishes one per resync, every minute by default; missing data is breaching). The agent is down,
  has no leader, or cannot reach AWS. A metric the agent publishes rather than a canary reading ``NODE#`` items:
  no extra Lambda, and the data point proves both the Kubernetes side (the resync listed nodes) and AWS access.
- ``DetachedLeftRunning``: the replenisher terminated an instance that was detached for early replacement and still
  running past ``DETACHED_MAX_SECONDS`` (``NodeManager/DetachedTerminated``, service ``replenisher``): the Spot
  reclaim never came, so the instance ran outside its group; it is gone now, the alarm says it happened.
- ``LambdaErrors<name>``: a Lambda invocation failed (``AWS/Lambda Errors`` > 0), e.g. a transient fault retried.

Every alarm notifies the topic when there is one: ``alarm_topic_arn`` (an existing topic) or, with
``create_alarm_topic``, a new one (SSL only; encrypted with the stack's KMS key when ``encryption: kms``). The
subscription (email, chat webhook through AWS Chatbot or an HTTPS endpoint) is the operator's choice.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import ArnFormat, CfnOutput, Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.nag import acknowledge

NAMESPACE = "NodeManager"  # the agent's CLOUDWATCH_NAMESPACE default
MEMBERSHIP_REPORTS = "AgentMembershipReports"
DRAIN_FAILURES = "DrainFailures"
LOCK_HELD_SECONDS = "LockHeldSeconds"  # published by the replenisher (lambdas/replenisher/handler.py)
DETACHED_TERMINATED = "DetachedTerminated"  # counted by the replenisher (lambdas/replenisher/execute.py)
REPLENISHER_SERVICE = "replenisher"  # its POWERTOOLS_SERVICE_NAME: Powertools adds it as the "service" dimension
PERIOD = Duration.minutes(5)


class Operations(Construct):
    """Dashboard, alarms and their outputs (see the module docstring).

    Parameters:
        cluster_name: the ``cluster`` dimension of the agent's and the Lambdas' metrics.
        dead_letter_queues: name -> queue, one ``DeadLetter<name>`` alarm each.
        functions: name -> Lambda, one ``LambdaErrors<name>`` alarm each.
        lock_alarm_seconds: ``LockHeldTooLong`` threshold.
        agent_silent_minutes: ``AgentSilent`` window (a multiple of 5 minutes is used, at least 5).
        alarm_topic_arn, create_alarm_topic: where alarms notify (none by default).
        encryption_key: the stack's KMS key, if any (encrypts a created topic).

    Attributes:
        alarms: name -> alarm; dashboard; topic (None without notifications).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster_name: str,
        dead_letter_queues: Mapping[str, sqs.IQueue],
        functions: Mapping[str, lambda_.IFunction],
        lock_alarm_seconds: int,
        agent_silent_minutes: int,
        alarm_topic_arn: str | None = None,
        create_alarm_topic: bool = False,
        encryption_key: kms.IKey | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.topic = self._topic(alarm_topic_arn, create_alarm_topic, encryption_key)
        dims = {"cluster": cluster_name}
        self.alarms: dict[str, cloudwatch.Alarm] = {}

        for name, queue in dead_letter_queues.items():
            self._alarm(
                f"DeadLetter{name}",
                queue.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum"),
                threshold=0,
                description=f"{name}: a message reached the dead-letter queue",
            )
        self._alarm(
            "DrainFailures",
            cloudwatch.Metric(
                namespace=NAMESPACE, metric_name=DRAIN_FAILURES, dimensions_map=dims, period=PERIOD, statistic="Sum"
            ),
            threshold=0,
            description="a drain ended failed or timed_out",
        )
        replenisher_dims = {**dims, "service": REPLENISHER_SERVICE}
        self._alarm(
            "LockHeldTooLong",
            cloudwatch.Metric(
                namespace=NAMESPACE,
                metric_name=LOCK_HELD_SECONDS,
                dimensions_map=replenisher_dims,
                period=PERIOD,
                statistic="Maximum",
            ),
            threshold=lock_alarm_seconds,
            description=f"the cluster lock is held by one holder for more than {lock_alarm_seconds} s",
        )
        periods = max(1, -(-agent_silent_minutes // 5))
        self._alarm(
            "AgentSilent",
            cloudwatch.Metric(
                namespace=NAMESPACE,
                metric_name=MEMBERSHIP_REPORTS,
                dimensions_map=dims,
                period=PERIOD,
                statistic="SampleCount",
            ),
            threshold=1,
            comparison=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            periods=periods,
            missing=cloudwatch.TreatMissingData.BREACHING,
            description=f"no membership report from the agent for {periods * 5} minutes",
        )
        self._alarm(
            "DetachedLeftRunning",
            cloudwatch.Metric(
                namespace=NAMESPACE,
                metric_name=DETACHED_TERMINATED,
                dimensions_map=replenisher_dims,
                period=PERIOD,
                statistic="Sum",
            ),
            threshold=0,
            description="an instance detached for early replacement was still running past its deadline (terminated)",
        )
        for name, function in functions.items():
            self._alarm(
                f"LambdaErrors{name}",
                function.metric_errors(period=PERIOD, statistic="Sum"),
                threshold=0,
                description=f"the {name} Lambda failed an invocation",
            )

        self.dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=None)
        self.dashboard.add_widgets(
            cloudwatch.AlarmStatusWidget(title="Alarms", alarms=list(self.alarms.values()), width=24),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Agent membership reports (nodes)",
                width=8,
                left=[
                    cloudwatch.Metric(
                        namespace=NAMESPACE,
                        metric_name=MEMBERSHIP_REPORTS,
                        dimensions_map=dims,
                        period=PERIOD,
                        statistic="Maximum",
                    )
                ],
            ),
            cloudwatch.GraphWidget(
                title="Drain failures",
                width=8,
                left=[
                    cloudwatch.Metric(
                        namespace=NAMESPACE,
                        metric_name=DRAIN_FAILURES,
                        dimensions_map=dims,
                        period=PERIOD,
                        statistic="Sum",
                    )
                ],
            ),
            cloudwatch.GraphWidget(
                title="Lock held (s)",
                width=8,
                left=[
                    cloudwatch.Metric(
                        namespace=NAMESPACE,
                        metric_name=LOCK_HELD_SECONDS,
                        dimensions_map=replenisher_dims,
                        period=PERIOD,
                        statistic="Maximum",
                    )
                ],
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Lambda errors",
                width=12,
                left=[f.metric_errors(period=PERIOD, statistic="Sum") for f in functions.values()],
            ),
            cloudwatch.GraphWidget(
                title="Dead-letter queues",
                width=12,
                left=[
                    q.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum")
                    for q in dead_letter_queues.values()
                ],
            ),
        )
        for name, alarm in self.alarms.items():
            CfnOutput(self, f"{name}AlarmName", value=alarm.alarm_name, description=alarm_description(alarm))
        CfnOutput(self, "DashboardName", value=self.dashboard.dashboard_name)
        if self.topic is not None:
            CfnOutput(self, "AlarmTopicArn", value=self.topic.topic_arn, description="alarms notify this topic")

    def _alarm(
        self,
        name: str,
        metric: cloudwatch.IMetric,
        *,
        threshold: float,
        description: str,
        comparison: cloudwatch.ComparisonOperator = cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        periods: int = 1,
        missing: cloudwatch.TreatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING,
    ) -> None:
        alarm = cloudwatch.Alarm(
            self,
            name,
            metric=metric,
            threshold=threshold,
            evaluation_periods=periods,
            comparison_operator=comparison,
            treat_missing_data=missing,
            alarm_description=f"node-manager: {description} (README, Operations)",
        )
        if self.topic is not None:
            alarm.add_alarm_action(actions.SnsAction(self.topic))
            alarm.add_ok_action(actions.SnsAction(self.topic))
        self.alarms[name] = alarm

    def _topic(self, arn: str | None, create: bool, key: kms.IKey | None) -> sns.ITopic | None:
        if arn is not None:
            return sns.Topic.from_topic_arn(self, "AlarmTopic", arn)
        if not create:
            return None
        topic = sns.Topic(self, "AlarmTopic", enforce_ssl=True, master_key=key, display_name="node-manager alarms")
        if key is not None:
            # CloudWatch publishes alarm notifications to an encrypted topic only with a key it may use
            key.add_to_resource_policy(
                iam.PolicyStatement(
                    sid="CloudWatchAlarmsToTopic",
                    principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                    actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                    resources=["*"],
                    # only this account's alarms (confused deputy: https://docs.aws.amazon.com/IAM/latest/UserGuide/
                    # confused-deputy.html)
                    conditions={
                        "ArnLike": {
                            "aws:SourceArn": Stack.of(self).format_arn(
                                service="cloudwatch",
                                resource="alarm",
                                resource_name="*",
                                arn_format=ArnFormat.COLON_RESOURCE_NAME,
                            )
                        },
                        "StringEquals": {"aws:SourceAccount": Stack.of(self).account},
                    },
                )
            )
        else:
            acknowledge(
                topic,
                "AwsSolutions-SNS2",
                "CloudWatch alarm actions cannot publish to a topic encrypted with the AWS managed SNS key; "
                "with encryption: kms the topic uses the stack's customer managed key. Alarm notifications "
                "carry no secrets.",
            )
        return topic


def alarm_description(alarm: cloudwatch.Alarm) -> str:
    """The alarm's name as the output's description (its purpose is in the alarm's own description)."""
    return f"CloudWatch alarm {alarm.node.id}"


def attach_put_metric_data(
    scope: Construct, construct_id: str, role: iam.IRole, namespace: str = NAMESPACE
) -> iam.Policy:
    """Allow ``cloudwatch:PutMetricData`` into ``namespace`` only (condition key ``cloudwatch:namespace``; the
    action supports no resource-level permissions, so the resource is ``*``)."""
    policy = iam.Policy(
        scope,
        construct_id,
        roles=[role],
        statements=[
            iam.PolicyStatement(
                sid="PutMetricDataInOwnNamespace",
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringEquals": {"cloudwatch:namespace": namespace}},
            ),
        ],
    )
    acknowledge(
        policy,
        "AwsSolutions-IAM5[Resource::*]",
        f"cloudwatch:PutMetricData supports no resource-level permissions; the statement is limited to the "
        f"{namespace} namespace by the cloudwatch:namespace condition.",
    )
    return policy
