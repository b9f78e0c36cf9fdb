"""ReplenisherHandler: the replenisher Lambda and the EventBridge rules that invoke it.

Rules on the default bus (each target with a retry policy and the unit's dead-letter queue):

- ``EC2 Instance Launch Unsuccessful`` and ``EC2 Instance Launch Successful`` (source ``aws.autoscaling``,
  https://docs.aws.amazon.com/autoscaling/ec2/userguide/ec2-auto-scaling-event-reference.html), narrowed to the
  groups whose name ends in ``.<cluster>`` (kOps names every group ``<instance group>.<cluster>``); the handler
  checks the ``KubernetesCluster`` tag itself.
- a periodic tick (``Scheduled Event``, every ``tick_minutes``): the safety net for whatever an event missed
  (a recovery's hold period ending, a drain result event lost).
- the agent's ``Node Drain Succeeded/Failed/Skipped`` (source ``node-manager.agent``) for this cluster, so a
  give-back moves on as soon as its drain ends.

The function runs with a reserved concurrency of 1: Auto Scaling retries a failing launch every few seconds and
each retry is an event; one invocation at a time reconciles them in order (the cluster lock and the ledger's
versioned writes make a second one harmless anyway). Its permissions on other units are granted by the stack.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.config import REPLENISHER_TIMEOUT_SECONDS, Architecture
from infra.function import event_dead_letter_queue, invoking_rule, unit_function

HANDLER = "lambdas.replenisher.handler.lambda_handler"
AUTOSCALING_SOURCE = "aws.autoscaling"
LAUNCH_UNSUCCESSFUL = "EC2 Instance Launch Unsuccessful"
LAUNCH_SUCCESSFUL = "EC2 Instance Launch Successful"
AGENT_SOURCE = "node-manager.agent"
DRAIN_RESULTS = ("Node Drain Succeeded", "Node Drain Failed", "Node Drain Skipped")
# the replenisher's own commands (``lambdas.replenisher.decide.builder.OWN_COMMAND_PREFIXES``): only their results
# reach it; a refresh's or a Spot drain's result (one per node replaced) would be a reconcile that finds nothing to do
COMMAND_PREFIXES = ("giveback-", "surplus-")
POWERTOOLS_SERVICE_NAME = "replenisher"
TIMEOUT = Duration.seconds(REPLENISHER_TIMEOUT_SECONDS)  # the lock lease is checked against it (infra.config)
MEMORY_MB = 256
# The replenisher reconciles the whole cluster on any event, so an old event is still worth a run: an hour.
EVENT_MAX_AGE = Duration.hours(1)
DEFAULT_TICK_MINUTES = 2


class ReplenisherHandler(Construct):
    """The replenisher Lambda, its log group and role, its rules and their dead-letter queue.

    Parameters:
        code: the shared Lambda asset (``infra.bundling.lambda_code``), built for ``architecture``.
        cluster_name: the kOps cluster (rules narrowed to its groups and agent events).
        settings_environment: the ``ReplenisherSettings`` variables.
        architecture, log_retention_days, log_level, tracing: the function's configuration.
        event_retry_attempts: the rules' target retry attempts.
        tick_minutes: the periodic tick's rate.
        encryption_key: encrypt the dead-letter queue with it; None: SSE-SQS.

    Attributes:
        function, role, log_group, dead_letter_queue, rules (keyed by ``launch-unsuccessful``,
        ``launch-successful``, ``tick``, ``drain-results``).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: lambda_.Code,
        cluster_name: str,
        settings_environment: Mapping[str, str],
        architecture: Architecture,
        log_retention_days: int,
        log_level: str,
        tracing: bool,
        event_retry_attempts: int,
        tick_minutes: int = DEFAULT_TICK_MINUTES,
        encryption_key: kms.IKey | None = None,
    ) -> None:
        super().__init__(scope, construct_id)

        unit = unit_function(
            self,
            name=POWERTOOLS_SERVICE_NAME,
            description="Covers an AZ that cannot launch from its siblings and gives the capacity back; "
            "removes surplus masters and instances that never registered",
            handler=HANDLER,
            code=code,
            settings_environment=settings_environment,
            architecture=architecture,
            log_retention_days=log_retention_days,
            log_level=log_level,
            tracing=tracing,
            timeout=TIMEOUT,
            memory_mb=MEMORY_MB,
            max_event_age=EVENT_MAX_AGE,
            reserved_concurrency=1,
        )
        self.function, self.role, self.log_group = unit.function, unit.role, unit.log_group
        self.dead_letter_queue = event_dead_letter_queue(self, encryption_key)

        group_suffix = {"AutoScalingGroupName": [{"suffix": f".{cluster_name}"}]}
        patterns: dict[str, tuple[str, events.EventPattern | None, events.Schedule | None]] = {
            "launch-unsuccessful": (
                "LaunchUnsuccessfulRule",
                events.EventPattern(
                    source=[AUTOSCALING_SOURCE], detail_type=[LAUNCH_UNSUCCESSFUL], detail=group_suffix
                ),
                None,
            ),
            "launch-successful": (
                "LaunchSuccessfulRule",
                events.EventPattern(source=[AUTOSCALING_SOURCE], detail_type=[LAUNCH_SUCCESSFUL], detail=group_suffix),
                None,
            ),
            "tick": ("TickRule", None, events.Schedule.rate(Duration.minutes(tick_minutes))),
            "drain-results": (
                "DrainResultRule",
                events.EventPattern(
                    source=[AGENT_SOURCE],
                    detail_type=list(DRAIN_RESULTS),
                    detail={"cluster": [cluster_name], "command_id": [{"prefix": p} for p in COMMAND_PREFIXES]},
                ),
                None,
            ),
        }
        self.rules: dict[str, events.Rule] = {}
        for key, (rule_id, pattern, schedule) in patterns.items():
            self.rules[key] = invoking_rule(
                self,
                rule_id,
                description=f"{key} -> replenisher Lambda",
                event_pattern=pattern,
                schedule=schedule,
                function=self.function,
                dead_letter_queue=self.dead_letter_queue,
                retry_attempts=event_retry_attempts,
                max_event_age=EVENT_MAX_AGE,
            )
