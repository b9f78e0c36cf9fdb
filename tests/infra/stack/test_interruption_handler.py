"""The interruption Lambda and its event rules: each detail type routed to it with retries and a dead-letter queue,
every rule of the stack matching only the deployment's account, the function's runtime, limits, logs and environment."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Match, Template

from core.settings import InterruptionSettings
from infra.interruption import HANDLER, REBALANCE_RECOMMENDATION, SPOT_INTERRUPTION_WARNING
from tests.infra.conftest import only
from tests.infra.stack.resources import CLUSTER, function_id, logical_id, queue_ids, state_table_id

pytestmark = pytest.mark.slow  # the package's one synth (tests/infra/stack/conftest.py): several seconds


def test_every_event_rule_matches_only_the_deployments_account(template: Template) -> None:
    """An event another account forwards to this bus (cross-account EventBridge) is never delivered to a function."""
    rules = template.find_resources("AWS::Events::Rule")
    patterned = [r["Properties"]["EventPattern"] for r in rules.values() if "EventPattern" in r["Properties"]]
    assert len(patterned) >= 5  # Spot, rebalance, state change, lifecycle, launch failure/success, agent results
    accounts = {str(p["account"]) for p in patterned}
    assert len(accounts) == 1 and all(len(p["account"]) == 1 for p in patterned), accounts


@pytest.mark.parametrize("detail_type", [SPOT_INTERRUPTION_WARNING, REBALANCE_RECOMMENDATION])
def test_rule_sends_its_detail_type_to_the_lambda_with_retries_and_a_dead_letter_queue(
    template: Template, detail_type: str
) -> None:
    assert detail_type in ("EC2 Spot Instance Interruption Warning", "EC2 Instance Rebalance Recommendation")
    fn = function_id(template)
    rule_id, rule = only(
        template.find_resources(
            "AWS::Events::Rule", {"Properties": {"EventPattern": {"source": ["aws.ec2"], "detail-type": [detail_type]}}}
        )
    )
    assert set(rule["Properties"]["EventPattern"]) == {"source", "detail-type", "account"}
    assert "EventBusName" not in rule["Properties"]  # the default bus, where aws.ec2 events arrive
    (target,) = rule["Properties"]["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": [fn, "Arn"]}
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 2, "MaximumEventAgeInSeconds": 90}
    dlq_id = target["DeadLetterConfig"]["Arn"]["Fn::GetAtt"][0]
    resources = template.to_json()["Resources"]
    assert resources[dlq_id]["Type"] == "AWS::SQS::Queue"
    assert resources[dlq_id]["Properties"]["SqsManagedSseEnabled"] is True
    # EventBridge may write to the DLQ only on behalf of this rule, and invoke the Lambda only for it.
    template.has_resource_properties(
        "AWS::SQS::QueuePolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Effect": "Allow",
                                "Action": "sqs:SendMessage",
                                "Principal": {"Service": "events.amazonaws.com"},
                                "Condition": {"ArnEquals": {"aws:SourceArn": {"Fn::GetAtt": [rule_id, "Arn"]}}},
                            }
                        ),
                    ]
                )
            }
        },
    )
    template.has_resource_properties(
        "AWS::Lambda::Permission", {"Principal": "events.amazonaws.com", "SourceArn": {"Fn::GetAtt": [rule_id, "Arn"]}}
    )
    # + the EC2 state-change rule and the lifecycle-action rule (infra/lifecycle.py; the replenisher hooks the
    # cluster's groups by tag, so the actions' rule is there without named groups)
    assert (
        len(
            template.find_resources(
                "AWS::Events::Rule",
                {"Properties": {"Targets": [Match.object_like({"Arn": {"Fn::GetAtt": [fn, "Arn"]}})]}},
            )
        )
        == 4
    )


def test_lambda_runtime_architecture_and_limits(template: Template) -> None:
    template.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "Runtime": "python3.12",
            "Architectures": ["arm64"],
            "Handler": HANDLER,
            "Timeout": 30,
            "ReservedConcurrentExecutions": 3,
        },
    )
    template.has_resource_properties(
        "AWS::Lambda::EventInvokeConfig",
        {"FunctionName": {"Ref": function_id(template)}, "MaximumEventAgeInSeconds": 90},
    )
    assert HANDLER == "lambdas.interruption.handler.lambda_handler"


def test_lambda_logs_to_its_own_log_group_with_retention(template: Template) -> None:
    fn = template.to_json()["Resources"][function_id(template)]["Properties"]
    group_id = fn["LoggingConfig"]["LogGroup"]["Ref"]
    assert template.to_json()["Resources"][group_id]["Properties"]["RetentionInDays"] == 14


def test_lambda_environment(template: Template) -> None:
    env = template.to_json()["Resources"][function_id(template)]["Properties"]["Environment"]["Variables"]
    queue_id, _ = queue_ids(template)
    idempotency_id = logical_id(
        template, "AWS::DynamoDB::Table", {"TimeToLiveSpecification": {"AttributeName": "expiration", "Enabled": True}}
    )
    assert env == {
        "CLUSTER_NAME": CLUSTER,
        "TABLE_NAME": {"Ref": state_table_id(template)},
        "QUEUE_URL": {"Ref": queue_id},
        "IDEMPOTENCY_TABLE_NAME": {"Ref": idempotency_id},
        "SPOT_DEADLINE_SECONDS": "100",
        "EARLY_REPLACEMENT": "false",
        "REBALANCE_POLICY": "drain",
        "REBALANCE_DRAIN_TIMEOUT_SECONDS": "300",
        "REBALANCE_QUIET_SECONDS": "1800",
        "REBALANCE_REPLACE_LIMIT": "1",
        "REBALANCE_MAX_CORDONED_PERCENT": "20",
        "DRY_RUN": "false",
        "POWERTOOLS_SERVICE_NAME": "interruption",
        "POWERTOOLS_METRICS_NAMESPACE": "NodeManager",
        "LOG_LEVEL": "DEBUG",
        "POWERTOOLS_TRACE_DISABLED": "true",
    }
    # What the Lambda will read at start validates, once CloudFormation has resolved the references.
    resolved = {k: v if isinstance(v, str) else f"resolved-{k.lower()}" for k, v in env.items()}
    settings = InterruptionSettings.from_env(resolved)
    assert settings.cluster_name == CLUSTER and settings.spot_deadline_seconds == 100
