"""RefresherHandler: the refresher Lambda and the EventBridge rules that invoke it.

Rules on the default bus, each target with a retry policy and the unit's dead-letter queue:

- ``weekly``: the schedule from the settings (``refresh_schedule``, an EventBridge cron expression, UTC); its target
  input is ``{"trigger": "schedule"}``: start a run with the settings' defaults.
- ``tick``: every ``refresh_tick_minutes``, input ``{"trigger": "tick"}``: advance the active run whatever event
  was missed, free a lock a crashed start left. Never starts a run.
- ``drain-results``: the agent's ``Node Drain Succeeded/Failed/Skipped`` (source ``node-manager.agent``) for this
  cluster and the refresher's own commands (``command_id`` prefix ``refresh-``): the step after a drain.
- ``node-ready``: the agent's ``Node Ready`` (source ``node-manager.agent``) for this cluster: nodes that became
  Ready, a hint to advance a run waiting for one (the function reads membership itself; no run: acknowledged).
- No rule for ``EC2 Instance Launch Successful``: a surge records its spare's launch wait itself and the spare's
  ``Node Ready`` advances the run (the tick enforces the launch's deadline), so the function acknowledged that event
  with no call; a rule only paid for an invocation per launch in the cluster. The function still accepts one (an
  event routed by an older stack during an update).

Manual runs are ``aws lambda invoke`` (or ``python -m cli --function-name``) on the function, by the operator role
this unit creates (``operator_role``: assumable by principals of the account allowed ``sts:AssumeRole`` on it, and
allowed ``lambda:InvokeFunction`` on this function only). The function's resource policy names only its rules
(``events.amazonaws.com`` with each rule's ``SourceArn``); restricting who else in the account may invoke it takes an
SCP or a permission boundary (README). The function's permissions on other units are granted by the stack.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.config import REFRESHER_TIMEOUT_SECONDS, Architecture
from infra.function import event_dead_letter_queue, invoking_rule, unit_function

HANDLER = "lambdas.refresher.handler.lambda_handler"
AGENT_SOURCE = "node-manager.agent"
DRAIN_RESULTS = ("Node Drain Succeeded", "Node Drain Failed", "Node Drain Skipped")
COMMAND_PREFIX = "refresh-"
# REBALANCE_POLICY=replace: the result of a rebalance cordon wakes the replacement run the interruption Lambda started
# just before it (lambdas.refresher.service); any other rebalance result is acknowledged.
CORDON_RESULTS = ("Node Cordon Succeeded", "Node Cordon Failed", "Node Cordon Skipped")
REBALANCE_PREFIX = "rebalance-"
NODE_READY = "Node Ready"
POWERTOOLS_SERVICE_NAME = "refresher"
# An invocation polls for a node to become Ready for at most REFRESH_WAIT_BUDGET_SECONDS (60) and stops 5 s before
# its timeout; 120 s leaves room for the calls around it.
TIMEOUT = Duration.seconds(REFRESHER_TIMEOUT_SECONDS)  # the lock lease is checked against it (infra.config)
MEMORY_MB = 256
# Every invocation re-reads the world, so a late event is still a useful wake-up: an hour.
EVENT_MAX_AGE = Duration.hours(1)


class RefresherHandler(Construct):
    """The refresher Lambda, its log group and role, its four rules and their dead-letter queue.

    Parameters:
        code: the shared Lambda asset (``infra.bundling.lambda_code``), built for ``architecture``.
        cluster_name: the kOps cluster (rules narrowed to its groups and its agent events).
        settings_environment: the ``RefresherSettings`` variables (``ClusterConfig.refresher_environment``).
        schedule_expression: the weekly rule's ``cron(...)``/``rate(...)`` expression.
        tick_minutes: the safety-net tick's rate.
        architecture, log_retention_days, log_level, tracing: the function's configuration.
        event_retry_attempts: the rules' target retry attempts.
        encryption_key: encrypt the dead-letter queue with it; None: SSE-SQS.

    Attributes:
        function, role, log_group, dead_letter_queue, rules (keyed by ``weekly``, ``tick``, ``drain-results``,
        ``node-ready``, ``launch-successful``), operator_role (may invoke the function, for manual runs).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: lambda_.Code,
        cluster_name: str,
        settings_environment: Mapping[str, str],
        schedule_expression: str,
        tick_minutes: int,
        architecture: Architecture,
        log_retention_days: int,
        log_level: str,
        tracing: bool,
        event_retry_attempts: int,
        encryption_key: kms.IKey | None = None,
    ) -> None:
        super().__init__(scope, construct_id)

        unit = unit_function(
            self,
            name=POWERTOOLS_SERVICE_NAME,
            description="Rolling refresh of the cluster's instances, surge first: weekly, on demand, and advanced "
            "by drain results, launches and nodes Ready",
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
        )
        self.function, self.role, self.log_group = unit.function, unit.role, unit.log_group
        self.dead_letter_queue = event_dead_letter_queue(self, encryption_key)

        rules: dict[
            str, tuple[str, events.EventPattern | None, events.Schedule | None, events.RuleTargetInput | None]
        ] = {
            "weekly": (
                "WeeklyRule",
                None,
                events.Schedule.expression(schedule_expression),
                events.RuleTargetInput.from_object({"trigger": "schedule"}),
            ),
            "tick": (
                "TickRule",
                None,
                events.Schedule.rate(Duration.minutes(tick_minutes)),
                events.RuleTargetInput.from_object({"trigger": "tick"}),
            ),
            "drain-results": (
                "DrainResultRule",
                events.EventPattern(
                    source=[AGENT_SOURCE],
                    detail_type=[*DRAIN_RESULTS, *CORDON_RESULTS],
                    detail={
                        "cluster": [cluster_name],
                        "command_id": [{"prefix": COMMAND_PREFIX}, {"prefix": REBALANCE_PREFIX}],
                    },
                ),
                None,
                None,
            ),
            "node-ready": (
                "NodeReadyRule",
                events.EventPattern(
                    source=[AGENT_SOURCE], detail_type=[NODE_READY], detail={"cluster": [cluster_name]}
                ),
                None,
                None,
            ),
        }
        self.rules: dict[str, events.Rule] = {}
        for key, (rule_id, pattern, schedule, target_input) in rules.items():
            self.rules[key] = invoking_rule(
                self,
                rule_id,
                description=f"{key} -> refresher Lambda",
                event_pattern=pattern,
                schedule=schedule,
                target_input=target_input,
                function=self.function,
                dead_letter_queue=self.dead_letter_queue,
                retry_attempts=event_retry_attempts,
                max_event_age=EVENT_MAX_AGE,
            )

        self.operator_role = iam.Role(
            self,
            "OperatorRole",
            assumed_by=iam.AccountRootPrincipal(),
            description=f"node-manager operator of cluster {cluster_name}: manual refresh, status, cancel",
        )
        iam.Policy(
            self,
            "OperatorInvokePolicy",
            roles=[self.operator_role],
            statements=[
                iam.PolicyStatement(
                    sid="InvokeTheRefresher",
                    actions=["lambda:InvokeFunction"],
                    resources=[self.function.function_arn],
                )
            ],
        )
