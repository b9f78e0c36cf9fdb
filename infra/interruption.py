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

from aws_cdk import Duration, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.config import Architecture
from infra.function import event_dead_letter_queue, invoking_rule, unit_function

HANDLER = "lambdas.interruption.handler.lambda_handler"
EVENT_SOURCE = "aws.ec2"
SPOT_INTERRUPTION_WARNING = "EC2 Spot Instance Interruption Warning"
REBALANCE_RECOMMENDATION = "EC2 Instance Rebalance Recommendation"
POWERTOOLS_SERVICE_NAME = "interruption"
TIMEOUT = Duration.seconds(30)
MEMORY_MB = 256


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

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: lambda_.Code,
        settings_environment: Mapping[str, str],
        architecture: Architecture,
        log_retention_days: int,
        log_level: str,
        reserved_concurrency: int | None,
        tracing: bool,
        event_retry_attempts: int,
        event_max_age_seconds: int,
        encryption_key: kms.IKey | None = None,
    ) -> None:
        super().__init__(scope, construct_id)

        # Asynchronous invocation (EventBridge): retry a failed run, but not past the event's usefulness.
        max_event_age = Duration.seconds(event_max_age_seconds)
        unit = unit_function(
            self,
            name=POWERTOOLS_SERVICE_NAME,
            description="Cordons and drains a node on an EC2 Spot interruption warning or rebalance recommendation",
            handler=HANDLER,
            code=code,
            settings_environment=settings_environment,
            architecture=architecture,
            log_retention_days=log_retention_days,
            log_level=log_level,
            tracing=tracing,
            timeout=TIMEOUT,
            memory_mb=MEMORY_MB,
            max_event_age=max_event_age,
            reserved_concurrency=reserved_concurrency,
        )
        self.function, self.role, self.log_group = unit.function, unit.role, unit.log_group
        self.dead_letter_queue = event_dead_letter_queue(self, encryption_key)

        self.rules: dict[str, events.Rule] = {}
        for rule_id, detail_type in (
            ("SpotInterruptionRule", SPOT_INTERRUPTION_WARNING),
            ("RebalanceRecommendationRule", REBALANCE_RECOMMENDATION),
        ):
            self.rules[detail_type] = invoking_rule(
                self,
                rule_id,
                description=f"{detail_type} -> interruption Lambda",
                event_pattern=events.EventPattern(source=[EVENT_SOURCE], detail_type=[detail_type]),
                function=self.function,
                dead_letter_queue=self.dead_letter_queue,
                retry_attempts=event_retry_attempts,
                max_event_age=max_event_age,
            )

        if encryption_key is not None:
            # EventBridge writes undeliverable events to the KMS-encrypted queue as events.amazonaws.com. The
            # rules' ARNs cannot be named here (key -> rule -> queue -> key would be a cycle): any rule of this
            # account and region.
            rule_arns = Stack.of(self).format_arn(service="events", resource="rule", resource_name="*")
            encryption_key.add_to_resource_policy(
                iam.PolicyStatement(
                    sid="EventBridgeRulesToDeadLetterQueue",
                    principals=[iam.ServicePrincipal("events.amazonaws.com")],
                    actions=["kms:GenerateDataKey", "kms:Decrypt"],
                    resources=["*"],
                    conditions={
                        "ArnLike": {"aws:SourceArn": rule_arns},
                        "StringEquals": {"aws:SourceAccount": Stack.of(self).account},
                    },
                )
            )
