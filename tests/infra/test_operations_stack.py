"""The operations units of the stack (infra/lifecycle.py, infra/operations.py): termination hooks on the named
groups (and the replenisher's settings to hook every group of the cluster by tag), the two rules to the interruption
Lambda, the alarms (each a stack output), the optional topic, and the agent's and the Lambda's new permissions,
scoped. One synthesis with hooks and a created topic (KMS encryption),
one with an existing topic."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Match, Template

from core.settings import InterruptionSettings

from .conftest import Synthesis, as_list, statements, synthesize

STACK = "NodeManager-ops-k8s-local"
GROUPS = ["nodes-us-east-1a.ops.k8s.local", "master-us-east-1a.masters.ops.k8s.local"]
CONTEXT = {
    "clusters": [
        {
            "name": "ops.k8s.local",
            "agent_trust_account": True,
            "account": "111122223333",
            "region": "us-east-1",
            "lifecycle_hook_groups": GROUPS,
            "lifecycle_hook_heartbeat_seconds": 600,
            "lock_alarm_seconds": 7200,
            "agent_silent_minutes": 15,
            "create_alarm_topic": True,
            "encryption": "kms",
        }
    ]
}
ALARMS = {
    "DeadLetterCommands",
    "DeadLetterInterruptionEvents",
    "DeadLetterReplenisherEvents",
    "DeadLetterRefresherEvents",
    "DrainFailures",
    "LockHeldTooLong",
    "AgentSilent",
    "DetachedLeftRunning",
    "LambdaErrorsInterruption",
    "LambdaErrorsReplenisher",
    "LambdaErrorsRefresher",
}


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesis:
    return synthesize(CONTEXT, tmp_path_factory.mktemp("cdk.out"))  # cdk-nag runs: no unacknowledged finding


@pytest.fixture(scope="module")
def template(synth: Synthesis) -> Template:
    return synth.template(STACK)


def test_each_named_group_gets_the_termination_hook(template: Template) -> None:
    hooks = template.find_resources("AWS::AutoScaling::LifecycleHook")
    assert sorted(h["Properties"]["AutoScalingGroupName"] for h in hooks.values()) == sorted(GROUPS)
    for hook in hooks.values():
        props = hook["Properties"]
        assert props["LifecycleTransition"] == "autoscaling:EC2_INSTANCE_TERMINATING"
        assert props["DefaultResult"] == "CONTINUE" and props["HeartbeatTimeout"] == 600
        # the name the interruption Lambda recognises as its own
        assert props["LifecycleHookName"] == InterruptionSettings.model_fields["lifecycle_hook_name"].default
        assert "NotificationTargetARN" not in props


def _rule_to_interruption(template: Template, detail_type: str) -> dict[str, Any]:
    rules = [
        r
        for r in template.find_resources("AWS::Events::Rule").values()
        if r["Properties"].get("EventPattern", {}).get("detail-type") == [detail_type]
    ]
    assert len(rules) == 1, detail_type
    return rules[0]["Properties"]


def test_the_replenisher_hooks_every_group_with_the_same_hook(template: Template) -> None:
    [replenisher] = template.find_resources(
        "AWS::Lambda::Function", {"Properties": {"Handler": "lambdas.replenisher.handler.lambda_handler"}}
    ).values()
    env = replenisher["Properties"]["Environment"]["Variables"]
    assert env["LIFECYCLE_HOOKS"] == "true"
    assert env["LIFECYCLE_HOOK_HEARTBEAT_SECONDS"] == "600"  # the named groups' hooks have the same timeout
    # the name is the one both Lambdas default to (the interruption Lambda matches actions by it)
    assert "LIFECYCLE_HOOK_NAME" not in env


def test_lifecycle_actions_of_our_hook_and_going_states_reach_the_interruption_lambda(template: Template) -> None:
    lifecycle = _rule_to_interruption(template, "EC2 Instance-terminate Lifecycle Action")
    assert lifecycle["EventPattern"]["source"] == ["aws.autoscaling"]
    assert lifecycle["EventPattern"]["detail"] == {"LifecycleHookName": ["node-manager-drain"]}
    state = _rule_to_interruption(template, "EC2 Instance State-change Notification")
    assert state["EventPattern"]["detail"] == {"state": ["stopping", "shutting-down", "terminated"]}
    functions = template.find_resources(
        "AWS::Lambda::Function", {"Properties": {"Handler": "lambdas.interruption.handler.lambda_handler"}}
    )
    [function_id] = functions
    for rule in (lifecycle, state):
        [target] = rule["Targets"]
        assert target["Arn"] == {"Fn::GetAtt": [function_id, "Arn"]}
        assert "DeadLetterConfig" in target and target["RetryPolicy"]["MaximumEventAgeInSeconds"] == 3600


def test_every_alarm_is_a_stack_output_and_notifies_the_topic(synth: Synthesis, template: Template) -> None:
    alarms = template.find_resources("AWS::CloudWatch::Alarm")
    assert len(alarms) == len(ALARMS)
    outputs = synth.template_json(STACK)["Outputs"]
    named = [key for key in outputs if key.startswith("Operations") and "AlarmName" in key]
    assert len(named) == len(ALARMS)
    assert {a for a in ALARMS if any(k.startswith(f"Operations{a}AlarmName") for k in named)} == ALARMS
    for logical_id, alarm in alarms.items():
        assert any(out["Value"] == {"Ref": logical_id} for out in outputs.values())
        [topic] = template.find_resources("AWS::SNS::Topic")
        assert alarm["Properties"]["AlarmActions"] == [{"Ref": topic}]
    assert any(k.startswith("OperationsAlarmTopicArn") for k in outputs)
    assert any(k.startswith("OperationsDashboardName") for k in outputs)
    template.resource_count_is("AWS::CloudWatch::Dashboard", 1)


def _alarm(template: Template, metric: str) -> dict[str, Any]:
    [alarm] = [
        a["Properties"]
        for a in template.find_resources("AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("MetricName") == metric
    ]
    return alarm


def test_alarm_definitions(template: Template) -> None:
    silent = _alarm(template, "AgentMembershipReports")
    assert silent["Namespace"] == "NodeManager" and silent["Statistic"] == "SampleCount"
    assert silent["ComparisonOperator"] == "LessThanThreshold" and silent["Threshold"] == 1
    assert silent["TreatMissingData"] == "breaching" and silent["EvaluationPeriods"] == 3  # 15 min in 5 min periods
    assert silent["Dimensions"] == [{"Name": "cluster", "Value": "ops.k8s.local"}]
    lock = _alarm(template, "LockHeldSeconds")
    assert lock["Threshold"] == 7200 and lock["ComparisonOperator"] == "GreaterThanThreshold"
    assert lock["Namespace"] == "NodeManager" and lock["Statistic"] == "Maximum"
    # the replenisher publishes it (Powertools adds its service name as a dimension), not the agent
    assert {d["Name"]: d["Value"] for d in lock["Dimensions"]} == {"cluster": "ops.k8s.local", "service": "replenisher"}
    detached = _alarm(template, "DetachedTerminated")
    assert detached["Statistic"] == "Sum" and detached["Threshold"] == 0
    assert {d["Name"]: d["Value"] for d in detached["Dimensions"]} == {
        "cluster": "ops.k8s.local",
        "service": "replenisher",
    }
    drains = _alarm(template, "DrainFailures")
    assert drains["Statistic"] == "Sum" and drains["Threshold"] == 0 and drains["TreatMissingData"] == "notBreaching"
    dlq = [
        a["Properties"]
        for a in template.find_resources("AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("MetricName") == "ApproximateNumberOfMessagesVisible"
    ]
    assert len(dlq) == 4 and all(a["Threshold"] == 0 for a in dlq)
    errors = [
        a["Properties"]
        for a in template.find_resources("AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("MetricName") == "Errors"
    ]
    assert len(errors) == 3 and all(a["Namespace"] == "AWS/Lambda" for a in errors)


def test_the_created_topic_is_encrypted_and_ssl_only(template: Template) -> None:
    template.has_resource_properties("AWS::SNS::Topic", {"KmsMasterKeyId": Match.any_value()})
    template.has_resource_properties(
        "AWS::SNS::TopicPolicy",
        Match.object_like(
            {
                "PolicyDocument": {
                    "Statement": Match.array_with(
                        [Match.object_like({"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}})]
                    )
                }
            }
        ),
    )


def test_lifecycle_and_metric_permissions_are_scoped(template: Template) -> None:
    found = {}
    for statement in statements(template):
        for action in as_list(statement["Action"]):
            if action in (
                "autoscaling:CompleteLifecycleAction",
                "autoscaling:RecordLifecycleActionHeartbeat",
                "cloudwatch:PutMetricData",
            ):
                found.setdefault(action, []).append(statement)
    assert len(found["autoscaling:CompleteLifecycleAction"]) == 2  # the agent and the interruption Lambda
    assert len(found["autoscaling:RecordLifecycleActionHeartbeat"]) == 1  # the agent only
    for action in ("autoscaling:CompleteLifecycleAction", "autoscaling:RecordLifecycleActionHeartbeat"):
        for statement in found[action]:
            assert statement["Condition"] == {
                "StringEquals": {"autoscaling:ResourceTag/KubernetesCluster": "ops.k8s.local"}
            }
    [metrics] = found["cloudwatch:PutMetricData"]
    assert metrics["Condition"] == {"StringEquals": {"cloudwatch:namespace": "NodeManager"}}


def test_an_existing_topic_and_no_hooks_at_all(tmp_path_factory: pytest.TempPathFactory) -> None:
    """``lifecycle_hooks: false`` and no named group: no hook can exist, so neither the hooks nor their rule."""
    arn = "arn:aws:sns:us-east-1:111122223333:ops-alarms"
    synth = synthesize(
        {
            "clusters": [
                {
                    "name": "ops.k8s.local",
                    "account": "111122223333",
                    "region": "us-east-1",
                    "alarm_topic_arn": arn,
                    "agent_trust_account": True,
                    "lifecycle_hooks": False,
                }
            ]
        },
        tmp_path_factory.mktemp("cdk.out"),
    )
    template = synth.template(STACK)
    template.resource_count_is("AWS::AutoScaling::LifecycleHook", 0)
    template.resource_count_is("AWS::SNS::Topic", 0)
    for alarm in template.find_resources("AWS::CloudWatch::Alarm").values():
        assert alarm["Properties"]["AlarmActions"] == [arn]
    detail_types = [
        r["Properties"].get("EventPattern", {}).get("detail-type")
        for r in template.find_resources("AWS::Events::Rule").values()
    ]
    assert ["EC2 Instance-terminate Lifecycle Action"] not in detail_types
    assert ["EC2 Instance State-change Notification"] in detail_types
    [replenisher] = template.find_resources(
        "AWS::Lambda::Function", {"Properties": {"Handler": "lambdas.replenisher.handler.lambda_handler"}}
    ).values()
    assert replenisher["Properties"]["Environment"]["Variables"]["LIFECYCLE_HOOKS"] == "false"
