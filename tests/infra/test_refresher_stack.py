"""The refresher unit in the stack: its function (shared asset, valid settings), its four rules (weekly schedule
from the settings, tick, the agent's drain results and "Node Ready" reports; no Launch Successful, which the function
would only acknowledge) each with a retry policy and a dead-letter queue, and IAM scoped to the cluster's groups."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Match, Template

from core.kops import CLUSTER_TAG
from core.settings import RefresherSettings
from infra.refresher import HANDLER

from .conftest import Synthesis, as_list, only, statements, synthesize

CLUSTER = "prod.k8s.example.com"
STACK = "NodeManager-prod-k8s-example-com"
CONTEXT = {
    "clusters": [
        {
            "name": CLUSTER,
            "agent_trust_account": True,
            "account": "111122223333",
            "region": "eu-west-1",
            "event_retry_attempts": 2,
            "refresh_schedule": "cron(30 4 ? * SAT *)",
            "refresh_tick_minutes": 3,
            "refresh_max_age": "14d",
            "refresh_drain_timeout_policy": "terminate",
        }
    ]
}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Template:
    synth: Synthesis = synthesize(CONTEXT, tmp_path_factory.mktemp("cdk.out"))
    return synth.template(STACK)


def refresher(template: Template) -> tuple[str, dict[str, Any]]:
    return only(template.find_resources("AWS::Lambda::Function", {"Properties": {"Handler": HANDLER}}))


def test_function_shares_the_asset_and_reads_valid_settings(template: Template) -> None:
    _, fn = refresher(template)
    props = fn["Properties"]
    interruption = only(
        template.find_resources(
            "AWS::Lambda::Function", {"Properties": {"Handler": "lambdas.interruption.handler.lambda_handler"}}
        )
    )[1]
    assert props["Code"] == interruption["Properties"]["Code"]  # one asset, another handler
    assert props["Timeout"] >= 90  # the in-invocation wait budget (60 s) fits
    env = props["Environment"]["Variables"]
    assert env["POWERTOOLS_SERVICE_NAME"] == "refresher"
    resolved = {
        k: v if isinstance(v, str) else f"resolved-{k.lower()}"
        for k, v in env.items()
        if k in RefresherSettings.ENV_VARS.values()
    }
    settings = RefresherSettings.from_env(resolved)
    assert settings.cluster_name == CLUSTER and settings.max_age_seconds == 14 * 86400
    assert settings.drain_timeout_policy == "terminate"
    # held for one pass of one invocation (docs/DESIGN.md), so it outlives the function's timeout
    assert settings.lock_lease_seconds > props["Timeout"]


def test_weekly_tick_drain_result_and_node_ready_rules_each_with_retries_and_a_dlq(template: Template) -> None:
    fn_id, _ = refresher(template)
    rules = template.find_resources(
        "AWS::Events::Rule", {"Properties": {"Targets": [Match.object_like({"Arn": {"Fn::GetAtt": [fn_id, "Arn"]}})]}}
    )
    assert len(rules) == 4
    schedules, patterns, inputs = set(), [], []
    for rule in rules.values():
        props = rule["Properties"]
        (target,) = props["Targets"]
        assert target["RetryPolicy"]["MaximumRetryAttempts"] == 2
        assert "DeadLetterConfig" in target
        if "ScheduleExpression" in props:
            schedules.add(props["ScheduleExpression"])
            inputs.append(target["Input"])
        else:
            patterns.append(props["EventPattern"])
    assert schedules == {"cron(30 4 ? * SAT *)", "rate(3 minutes)"}
    assert sorted(inputs) == ['{"trigger":"schedule"}', '{"trigger":"tick"}']
    by_source = {p["source"][0]: p for p in patterns if p["detail-type"] != ["Node Ready"]}
    (ready,) = [p for p in patterns if p["detail-type"] == ["Node Ready"]]
    # the agent's reports of its own cluster only; the source is the one its role may put (stack/test_agent_role.py)
    assert ready == {
        "source": ["node-manager.agent"],
        "detail-type": ["Node Ready"],
        "detail": {"cluster": [CLUSTER]},
        "account": ["111122223333"],  # the stack's own (every rule of it)
    }
    agent = by_source["node-manager.agent"]
    drains = {"Node Drain Succeeded", "Node Drain Failed", "Node Drain Skipped"}
    cordons = {"Node Cordon Succeeded", "Node Cordon Failed", "Node Cordon Skipped"}  # a replacement run's wake-up
    assert set(agent["detail-type"]) == drains | cordons
    assert agent["detail"] == {"cluster": [CLUSTER], "command_id": [{"prefix": "refresh-"}, {"prefix": "rebalance-"}]}
    assert "aws.autoscaling" not in by_source  # a launch ends no wait a pass records (the spare's Node Ready does)


def test_group_changes_only_on_the_clusters_groups_and_describes_read_only(template: Template) -> None:
    _fn_id, fn = refresher(template)
    role = fn["Properties"]["Role"]["Fn::GetAtt"][0]
    every = [s for s in statements(template) if {"Ref": role} in s["_roles"]]
    mine = [s for s in every if s["Effect"] == "Allow"]  # the group guard's Deny statements are tested on their own
    assert any(s["Effect"] == "Deny" for s in every)
    mutating = [
        s
        for s in mine
        if any(a.startswith("autoscaling:") and not a.startswith("autoscaling:Describe") for a in as_list(s["Action"]))
    ]
    assert len(mutating) == 1
    (group,) = mutating
    assert set(as_list(group["Action"])) == {
        "autoscaling:UpdateAutoScalingGroup",
        "autoscaling:TerminateInstanceInAutoScalingGroup",
    }
    assert group["Condition"] == {"StringEquals": {f"autoscaling:ResourceTag/{CLUSTER_TAG}": CLUSTER}}
    unscoped = [s for s in mine if s.get("Resource") == "*"]
    assert {a for s in unscoped for a in as_list(s["Action"])} == {
        "autoscaling:DescribeAutoScalingGroups",
        "ec2:DescribeInstances",
        "ec2:DescribeLaunchTemplates",
    }
    actions = {a for s in mine for a in as_list(s["Action"])}
    assert "sqs:SendMessage" in actions and "dynamodb:PutItem" in actions
    assert "autoscaling:DetachInstances" not in actions and "ec2:TerminateInstances" not in actions


def test_each_lambda_may_be_invoked_only_by_its_own_rules(template: Template) -> None:
    """The functions' resource policies name EventBridge with one of the stack's rules as SourceArn, nothing else
    (a direct invoke needs an identity permission; the README says how to restrict those further)."""
    functions = {
        logical_id
        for logical_id, function in template.find_resources("AWS::Lambda::Function").items()
        if function["Properties"]["Handler"].startswith("lambdas.")
    }
    rules = template.find_resources("AWS::Events::Rule")
    permissions = template.find_resources("AWS::Lambda::Permission")
    invoked = set()
    for permission in permissions.values():
        props = permission["Properties"]
        function_id = props["FunctionName"]["Fn::GetAtt"][0]
        if function_id not in functions:
            continue
        invoked.add(function_id)
        assert props["Action"] == "lambda:InvokeFunction"
        assert props["Principal"] == "events.amazonaws.com"
        rule_id = props["SourceArn"]["Fn::GetAtt"][0]
        targets = rules[rule_id]["Properties"]["Targets"]
        assert any(t["Arn"] == {"Fn::GetAtt": [function_id, "Arn"]} for t in targets)
    assert invoked == functions


def test_the_operator_role_may_invoke_the_refresher_only(template: Template) -> None:
    function_id, _ = refresher(template)
    role_id, role = only(
        template.find_resources("AWS::IAM::Role", {"Properties": {"Description": Match.string_like_regexp("operator")}})
    )
    (trust,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Action"] == "sts:AssumeRole"
    assert trust["Principal"]["AWS"] == {
        "Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":iam::111122223333:root"]]
    }
    granted = [s for s in statements(template) if {"Ref": role_id} in s["_roles"]]
    assert [(s["Action"], s["Resource"]) for s in granted] == [
        ("lambda:InvokeFunction", {"Fn::GetAtt": [function_id, "Arn"]})
    ]
    template.has_output("RefresherOperatorRoleArn", {"Value": {"Fn::GetAtt": [role_id, "Arn"]}})
