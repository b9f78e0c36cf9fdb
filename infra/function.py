"""What the Lambda units share: a function on the shared asset with its own log group and role, the dead-letter
queue of its EventBridge targets, and a rule invoking it with a retry policy and that queue.

The helpers create their resources in the calling construct (the ids ``LogGroup``, ``Role``, ``Function``,
``EventDeadLetterQueue`` and the rule's id), so each unit's resources keep their place in the tree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.bundling import PYTHON_RUNTIME
from infra.commands import DEAD_LETTER_RETENTION, encrypted_queue
from infra.config import Architecture
from infra.nag import acknowledge

METRICS_NAMESPACE = "NodeManager"
ASYNC_RETRY_ATTEMPTS = 2  # Lambda's own retries of a failed asynchronous invocation

LAMBDA_ARCHITECTURES = {
    Architecture.ARM64: lambda_.Architecture.ARM_64,
    Architecture.X86_64: lambda_.Architecture.X86_64,
}
_RETENTION_NAMES = {
    1: "ONE_DAY",
    3: "THREE_DAYS",
    5: "FIVE_DAYS",
    7: "ONE_WEEK",
    14: "TWO_WEEKS",
    30: "ONE_MONTH",
    60: "TWO_MONTHS",
    90: "THREE_MONTHS",
    120: "FOUR_MONTHS",
    150: "FIVE_MONTHS",
    180: "SIX_MONTHS",
    365: "ONE_YEAR",
    400: "THIRTEEN_MONTHS",
    545: "EIGHTEEN_MONTHS",
    731: "TWO_YEARS",
    1096: "THREE_YEARS",
    1827: "FIVE_YEARS",
    2192: "SIX_YEARS",
    2557: "SEVEN_YEARS",
    2922: "EIGHT_YEARS",
    3288: "NINE_YEARS",
    3653: "TEN_YEARS",
}


def retention(days: int) -> logs.RetentionDays:
    """``logs.RetentionDays`` for ``days`` (one of ``infra.config.LOG_RETENTION_DAYS``; KeyError otherwise)."""
    return logs.RetentionDays[_RETENTION_NAMES[days]]


@dataclass(frozen=True)
class UnitFunction:
    """A unit's function with its log group and role."""

    function: lambda_.Function
    role: iam.Role
    log_group: logs.LogGroup


def unit_function(
    scope: Construct,
    *,
    name: str,
    description: str,
    handler: str,
    code: lambda_.Code,
    settings_environment: Mapping[str, str],
    architecture: Architecture,
    log_retention_days: int,
    log_level: str,
    tracing: bool,
    timeout: Duration,
    memory_mb: int,
    max_event_age: Duration,
    reserved_concurrency: int | None = None,
) -> UnitFunction:
    """The ``name`` Lambda (``name`` is also its ``POWERTOOLS_SERVICE_NAME``) on the shared asset, in ``scope``.

    Its log group (``log_retention_days``, destroyed with the stack) and role (assumed by Lambda, allowed to write
    that log group only; other permissions are granted by the stack); its environment is ``settings_environment``
    plus Powertools' service name, metrics namespace, ``LOG_LEVEL`` and, without ``tracing``,
    ``POWERTOOLS_TRACE_DISABLED``; with ``tracing`` X-Ray active tracing. Asynchronous invocations (EventBridge) are
    retried twice, up to ``max_event_age``. cdk-nag's runtime finding (and, with tracing, X-Ray's wildcard) is
    acknowledged with its reason.
    """
    log_group = logs.LogGroup(
        scope, "LogGroup", retention=retention(log_retention_days), removal_policy=RemovalPolicy.DESTROY
    )
    role = iam.Role(
        scope,
        "Role",
        assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
        description=f"{name} Lambda of node-manager",
    )
    log_group.grant_write(role)
    environment = {
        **settings_environment,
        "POWERTOOLS_SERVICE_NAME": name,
        "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
        "LOG_LEVEL": log_level,
    }
    if not tracing:
        environment["POWERTOOLS_TRACE_DISABLED"] = "true"
    function = lambda_.Function(
        scope,
        "Function",
        description=description,
        runtime=PYTHON_RUNTIME,
        architecture=LAMBDA_ARCHITECTURES[architecture],
        handler=handler,
        code=code,
        role=role,
        timeout=timeout,
        memory_size=memory_mb,
        reserved_concurrent_executions=reserved_concurrency,
        environment=environment,
        log_group=log_group,
        tracing=lambda_.Tracing.ACTIVE if tracing else None,
        retry_attempts=ASYNC_RETRY_ATTEMPTS,
        max_event_age=max_event_age,
    )
    acknowledge(
        function,
        "AwsSolutions-L1",
        "The handlers and their dependencies are built and tested for Python 3.12 (the asset's "
        "wheels are cp312); moving to a newer runtime is a deliberate upgrade.",
    )
    if tracing:  # Lambda put the X-Ray statement in the role's default policy: acknowledge it there only
        acknowledge(
            role.node.find_child("DefaultPolicy"),
            "AwsSolutions-IAM5[Resource::*]",
            "X-Ray's PutTraceSegments and PutTelemetryRecords support no resource-level permissions; "
            "added by Lambda active tracing.",
        )
    return UnitFunction(function=function, role=role, log_group=log_group)


def event_dead_letter_queue(scope: Construct, encryption_key: kms.IKey | None) -> sqs.Queue:
    """The dead-letter queue (``EventDeadLetterQueue``) of a unit's rule targets: encrypted with
    ``encryption_key`` (None: SSE-SQS), kept ``DEAD_LETTER_RETENTION``."""
    queue = encrypted_queue(
        scope, "EventDeadLetterQueue", encryption_key=encryption_key, retention_period=DEAD_LETTER_RETENTION
    )
    acknowledge(
        queue, "AwsSolutions-SQS3", "This queue is itself the dead-letter queue of the EventBridge rule targets."
    )
    return queue


def invoking_rule(
    scope: Construct,
    rule_id: str,
    *,
    description: str,
    function: lambda_.IFunction,
    dead_letter_queue: sqs.IQueue,
    retry_attempts: int,
    max_event_age: Duration,
    event_pattern: events.EventPattern | None = None,
    schedule: events.Schedule | None = None,
    target_input: events.RuleTargetInput | None = None,
) -> events.Rule:
    """An EventBridge rule on the default bus (``event_pattern`` and/or ``schedule``) whose target is ``function``
    (with ``target_input`` instead of the event when given), retried ``retry_attempts`` times up to
    ``max_event_age``, undeliverable events going to ``dead_letter_queue``. A pattern also matches only events of
    the stack's own account (``account``): an event another account forwards to this bus is never delivered."""
    rule = events.Rule(scope, rule_id, description=description, event_pattern=event_pattern, schedule=schedule)
    if event_pattern is not None:
        rule.add_event_pattern(account=[Stack.of(scope).account])
    rule.add_target(
        targets.LambdaFunction(
            function,
            event=target_input,
            dead_letter_queue=dead_letter_queue,
            retry_attempts=retry_attempts,
            max_event_age=max_event_age,
        )
    )
    return rule
