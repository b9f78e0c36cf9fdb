"""InterruptionHandler: the interruption Lambda and the EventBridge rules that invoke it.

Two rules on the default bus, both ``source: aws.ec2`` (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/
spot-instance-termination-notices.html and .../rebalance-recommendations.html):

- ``EC2 Spot Instance Interruption Warning``: two minutes before Spot reclaims an instance.
- ``EC2 Instance Rebalance Recommendation``: an instance at elevated risk of interruption.

Each target has a retry policy (``event_retry_attempts``, ``event_max_age_seconds``: an interruption warning is
useless once its two minutes are over) and a dead-letter queue for events EventBridge could not deliver.

The function's permissions on other units (table, queue, Auto Scaling) are granted by the stack.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.bundling import PYTHON_RUNTIME
from infra.commands import DEAD_LETTER_RETENTION, encrypted_queue
from infra.config import Architecture
from infra.nag import acknowledge

HANDLER = "lambdas.interruption.handler.lambda_handler"
EVENT_SOURCE = "aws.ec2"
SPOT_INTERRUPTION_WARNING = "EC2 Spot Instance Interruption Warning"
REBALANCE_RECOMMENDATION = "EC2 Instance Rebalance Recommendation"
POWERTOOLS_SERVICE_NAME = "interruption"
METRICS_NAMESPACE = "NodeManager"
TIMEOUT = Duration.seconds(30)
MEMORY_MB = 256

LAMBDA_ARCHITECTURES = {
    Architecture.ARM64: lambda_.Architecture.ARM_64,
    Architecture.X86_64: lambda_.Architecture.X86_64,
}
_RETENTION_NAMES = {
    1: "ONE_DAY", 3: "THREE_DAYS", 5: "FIVE_DAYS", 7: "ONE_WEEK", 14: "TWO_WEEKS", 30: "ONE_MONTH",
    60: "TWO_MONTHS", 90: "THREE_MONTHS", 120: "FOUR_MONTHS", 150: "FIVE_MONTHS", 180: "SIX_MONTHS",
    365: "ONE_YEAR", 400: "THIRTEEN_MONTHS", 545: "EIGHTEEN_MONTHS", 731: "TWO_YEARS", 1096: "THREE_YEARS",
    1827: "FIVE_YEARS", 2192: "SIX_YEARS", 2557: "SEVEN_YEARS", 2922: "EIGHT_YEARS", 3288: "NINE_YEARS",
    3653: "TEN_YEARS",
}


def retention(days: int) -> logs.RetentionDays:
    """``logs.RetentionDays`` for ``days`` (one of ``infra.config.LOG_RETENTION_DAYS``; KeyError otherwise)."""
    return logs.RetentionDays[_RETENTION_NAMES[days]]


class InterruptionHandler(Construct):
    """The interruption Lambda, its log group and role, its two rules and their dead-letter queue.

    Parameters:
        code: the Lambda asset (``infra.bundling.lambda_code``), built for ``architecture``.
        settings_environment: the ``InterruptionSettings`` variables (``ClusterConfig.interruption_environment``).
        architecture, log_retention_days, log_level, reserved_concurrency, tracing: the function's configuration.
        event_retry_attempts, event_max_age_seconds: the rules' target retry policy.
        encryption_key: encrypt the dead-letter queue with it (and let EventBridge use it); None: SSE-SQS.

    Attributes:
        function, role, log_group, dead_letter_queue, rules (keyed by detail-type).
    """

    def __init__(self, scope: Construct, construct_id: str, *, code: lambda_.Code,
                 settings_environment: Mapping[str, str], architecture: Architecture, log_retention_days: int,
                 log_level: str, reserved_concurrency: int | None, tracing: bool, event_retry_attempts: int,
                 event_max_age_seconds: int, encryption_key: kms.IKey | None = None) -> None:
        super().__init__(scope, construct_id)

        self.log_group = logs.LogGroup(self, "LogGroup", retention=retention(log_retention_days),
                                       removal_policy=RemovalPolicy.DESTROY)
        self.role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                             description="interruption Lambda of node-manager")
        self.log_group.grant_write(self.role)

        environment = {
            **settings_environment,
            "POWERTOOLS_SERVICE_NAME": POWERTOOLS_SERVICE_NAME,
            "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
            "LOG_LEVEL": log_level,
        }
        if not tracing:
            environment["POWERTOOLS_TRACE_DISABLED"] = "true"
        max_event_age = Duration.seconds(event_max_age_seconds)
        self.function = lambda_.Function(
            self, "Function",
            description="Cordons and drains a node on an EC2 Spot interruption warning or rebalance recommendation",
            runtime=PYTHON_RUNTIME,
            architecture=LAMBDA_ARCHITECTURES[architecture],
            handler=HANDLER,
            code=code,
            role=self.role,
            timeout=TIMEOUT,
            memory_size=MEMORY_MB,
            reserved_concurrent_executions=reserved_concurrency,
            environment=environment,
            log_group=self.log_group,
            tracing=lambda_.Tracing.ACTIVE if tracing else None,
            # Asynchronous invocation (EventBridge): retry a failed run, but not past the event's usefulness.
            retry_attempts=2,
            max_event_age=max_event_age,
        )
        acknowledge(self.function, "AwsSolutions-L1",
                    "The handlers and their dependencies are built and tested for Python 3.12 (the asset's "
                    "wheels are cp312); moving to a newer runtime is a deliberate upgrade.")
        if tracing:  # Lambda put the X-Ray statement in the role's default policy: acknowledge it there only
            acknowledge(self.role.node.find_child("DefaultPolicy"), "AwsSolutions-IAM5[Resource::*]",
                        "X-Ray's PutTraceSegments and PutTelemetryRecords support no resource-level permissions; "
                        "added by Lambda active tracing.")

        self.dead_letter_queue = encrypted_queue(self, "EventDeadLetterQueue", encryption_key=encryption_key,
                                                 retention_period=DEAD_LETTER_RETENTION)
        acknowledge(self.dead_letter_queue, "AwsSolutions-SQS3",
                    "This queue is itself the dead-letter queue of the EventBridge rule targets.")

        self.rules: dict[str, events.Rule] = {}
        for rule_id, detail_type in (("SpotInterruptionRule", SPOT_INTERRUPTION_WARNING),
                                     ("RebalanceRecommendationRule", REBALANCE_RECOMMENDATION)):
            rule = events.Rule(self, rule_id, description=f"{detail_type} -> interruption Lambda",
                               event_pattern=events.EventPattern(source=[EVENT_SOURCE], detail_type=[detail_type]))
            rule.add_target(targets.LambdaFunction(self.function, dead_letter_queue=self.dead_letter_queue,
                                                   retry_attempts=event_retry_attempts, max_event_age=max_event_age))
            self.rules[detail_type] = rule

        if encryption_key is not None:
            # EventBridge writes undeliverable events to the KMS-encrypted queue as events.amazonaws.com. The
            # rules' ARNs cannot be named here (key -> rule -> queue -> key would be a cycle): any rule of this
            # account and region.
            rule_arns = Stack.of(self).format_arn(service="events", resource="rule", resource_name="*")
            encryption_key.add_to_resource_policy(iam.PolicyStatement(
                sid="EventBridgeRulesToDeadLetterQueue",
                principals=[iam.ServicePrincipal("events.amazonaws.com")],
                actions=["kms:GenerateDataKey", "kms:Decrypt"],
                resources=["*"],
                conditions={"ArnLike": {"aws:SourceArn": rule_arns}},
            ))
