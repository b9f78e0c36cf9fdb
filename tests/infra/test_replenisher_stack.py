"""The replenisher unit in the stack: its function, rules (retry policy + dead-letter queue), and IAM."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Match, Template

from core.kops import CLUSTER_TAG
from core.settings import ReplenisherSettings
from infra.replenisher import COMMAND_PREFIXES, HANDLER
from lambdas.replenisher.decide.builder import OWN_COMMAND_PREFIXES
from sim.eventbridge import REPLENISHER_COMMANDS

from .conftest import Synthesis, as_list, only, statements, synthesize

CLUSTER = "prod.k8s.example.com"
STACK = "NodeManager-prod-k8s-example-com"
CONTEXT = {
    "clusters": [
        {
            "name": CLUSTER,
            "account": "111122223333",
            "region": "eu-west-1",
            "event_retry_attempts": 2,
            "dry_run": True,
            "agent_trust_account": True,
        }
    ]
}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Template:
    synth: Synthesis = synthesize(CONTEXT, tmp_path_factory.mktemp("cdk.out"))
    return synth.template(STACK)


def replenisher(template: Template) -> tuple[str, dict[str, Any]]:
    return only(template.find_resources("AWS::Lambda::Function", {"Properties": {"Handler": HANDLER}}))


def rules_of(template: Template, fn: str) -> dict[str, dict[str, Any]]:
    return template.find_resources(
        "AWS::Events::Rule", {"Properties": {"Targets": [Match.object_like({"Arn": {"Fn::GetAtt": [fn, "Arn"]}})]}}
    )


def test_function_shares_the_asset_runs_alone_and_reads_valid_settings(template: Template) -> None:
    _fn_id, fn = replenisher(template)
    props = fn["Properties"]
    interruption = only(
        template.find_resources(
            "AWS::Lambda::Function", {"Properties": {"Handler": "lambdas.interruption.handler.lambda_handler"}}
        )
    )[1]
    assert props["Code"] == interruption["Properties"]["Code"]  # one asset, another handler
    assert props["ReservedConcurrentExecutions"] == 1
    env = props["Environment"]["Variables"]
    assert env["CLUSTER_NAME"] == CLUSTER and env["DRY_RUN"] == "true"
    assert env["POWERTOOLS_SERVICE_NAME"] == "replenisher"
    resolved = {
        k: v if isinstance(v, str) else f"resolved-{k.lower()}"
        for k, v in env.items()
        if k in ReplenisherSettings.ENV_VARS.values()
    }
    settings = ReplenisherSettings.from_env(resolved)
    assert settings.dry_run and settings.cluster_name == CLUSTER


def test_rules_for_launch_events_tick_and_drain_results_each_with_retries_and_a_dlq(template: Template) -> None:
    fn_id, _ = replenisher(template)
    rules = rules_of(template, fn_id)
    patterns = {}
    for rule in rules.values():
        props = rule["Properties"]
        (target,) = props["Targets"]
        assert target["RetryPolicy"] == {"MaximumRetryAttempts": 2, "MaximumEventAgeInSeconds": 3600}
        assert "DeadLetterConfig" in target
        if "ScheduleExpression" in props:
            patterns["tick"] = props["ScheduleExpression"]
        else:
            pattern = props["EventPattern"]
            for detail_type in pattern["detail-type"]:
                patterns[detail_type] = (pattern["source"], pattern.get("detail"))
    suffix = {"AutoScalingGroupName": [{"suffix": f".{CLUSTER}"}]}
    # only the results of the replenisher's own commands (a refresh's or a Spot drain's would be a reconcile for
    # nothing), the prefixes its decisions give them, and the simulation's rule the same
    assert COMMAND_PREFIXES == OWN_COMMAND_PREFIXES == REPLENISHER_COMMANDS
    ours = {"cluster": [CLUSTER], "command_id": [{"prefix": "giveback-"}, {"prefix": "surplus-"}]}
    assert patterns == {
        "EC2 Instance Launch Unsuccessful": (["aws.autoscaling"], suffix),
        "EC2 Instance Launch Successful": (["aws.autoscaling"], suffix),
        "tick": "rate(2 minutes)",
        "Node Drain Succeeded": (["node-manager.agent"], ours),
        "Node Drain Failed": (["node-manager.agent"], ours),
        "Node Drain Skipped": (["node-manager.agent"], ours),
    }
    dlqs = {r["Properties"]["Targets"][0]["DeadLetterConfig"]["Arn"]["Fn::GetAtt"][0] for r in rules.values()}
    assert len(dlqs) == 1


def test_mutating_calls_only_on_this_clusters_groups(template: Template) -> None:
    role = {
        "Ref": only(
            template.find_resources(
                "AWS::IAM::Role", {"Properties": {"Description": Match.string_like_regexp("replenisher")}}
            )
        )[0]
    }
    mine = [s for s in statements(template) if s["_roles"] == [role] and s["Effect"] == "Allow"]
    actions = {a: s for s in mine for a in as_list(s["Action"])}
    for action in (
        "autoscaling:UpdateAutoScalingGroup",
        "autoscaling:TerminateInstanceInAutoScalingGroup",
        "autoscaling:PutLifecycleHook",  # the termination hook of a group of the cluster (lambdas/replenisher/hooks)
    ):
        assert actions[action]["Condition"] == {"StringEquals": {f"autoscaling:ResourceTag/{CLUSTER_TAG}": CLUSTER}}
        assert actions[action]["Resource"] != "*"
    for action in (
        "autoscaling:DescribeAutoScalingGroups",
        "ec2:DescribeInstances",
        "autoscaling:DescribeLifecycleHooks",
    ):
        assert actions[action]["Resource"] == "*"
    assert "sqs:SendMessage" in actions and "dynamodb:Query" in actions
    # the one EC2 mutation: terminating detached instances left running, only the cluster's (tagged) instances
    assert {a for a in actions if a.startswith("ec2:") and not a.split(":")[1].startswith("Describe")} == {
        "ec2:TerminateInstances"
    }
    terminate = actions["ec2:TerminateInstances"]
    assert terminate["Condition"] == {"StringEquals": {f"ec2:ResourceTag/{CLUSTER_TAG}": CLUSTER}}
    assert "instance/*" in str(terminate["Resource"])
    assert "dynamodb:ConditionCheckItem" in actions  # the fenced writes' check of the LOCK item


def test_iam_bounds_what_the_replenisher_can_set_on_a_group(template: Template) -> None:
    """Bounded replay in IAM (FACTS.md, "IAM condition keys that matter here"; Service Authorization Reference,
    Amazon EC2 Auto Scaling: UpdateAutoScalingGroup supports autoscaling:MaxSize, autoscaling:MinSize,
    autoscaling:VPCZoneIdentifiers, autoscaling:LaunchTemplateVersionSpecified, autoscaling:InstanceTypes)."""
    role = {
        "Ref": only(
            template.find_resources(
                "AWS::IAM::Role", {"Properties": {"Description": Match.string_like_regexp("replenisher")}}
            )
        )[0]
    }
    denies = [s for s in statements(template) if s["_roles"] == [role] and s["Effect"] == "Deny"]
    assert all(as_list(s["Action"]) == ["autoscaling:UpdateAutoScalingGroup"] for s in denies)
    conditions = [s["Condition"] for s in denies]
    assert {"NumericGreaterThan": {"autoscaling:MaxSize": "200"}} in conditions  # max_group_size default
    for key in (
        "autoscaling:LaunchTemplateVersionSpecified",
        "autoscaling:VPCZoneIdentifiers",
        "autoscaling:InstanceTypes",
        "autoscaling:MinSize",
    ):
        assert {"Null": {key: "false"}} in conditions  # a request that carries the field is denied
    assert len(denies) == 5


def test_lifecycle_actions_reach_the_interruption_lambda_without_named_groups(template: Template) -> None:
    """No ``lifecycle_hook_groups``: the replenisher hooks the cluster's groups by tag, so the action rule is there."""
    template.resource_count_is("AWS::AutoScaling::LifecycleHook", 0)
    [rule] = [
        r["Properties"]
        for r in template.find_resources("AWS::Events::Rule").values()
        if r["Properties"].get("EventPattern", {}).get("detail-type") == ["EC2 Instance-terminate Lifecycle Action"]
    ]
    assert rule["EventPattern"]["detail"] == {
        "LifecycleHookName": [ReplenisherSettings.model_fields["lifecycle_hook_name"].default]
    }
