"""IAM of the Lambdas: mutating EC2 and Auto Scaling calls scoped to the cluster's tag, unscopable Describe calls on
a statement of their own, the table and queue through grants on those resources only."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Match, Template

from core.kops import CLUSTER_TAG
from tests.infra.conftest import as_list, statements
from tests.infra.stack.resources import CLUSTER, READ_ONLY_PREFIXES, logical_id, queue_ids, state_table_id

pytestmark = pytest.mark.slow  # the package's one synth (tests/infra/stack/conftest.py): several seconds


def test_lambda_detaches_only_instances_of_this_clusters_groups(template: Template) -> None:
    role = {
        "Ref": logical_id(
            template,
            "AWS::IAM::Role",
            {
                "AssumeRolePolicyDocument": {
                    "Statement": [Match.object_like({"Principal": {"Service": "lambda.amazonaws.com"}})]
                },
                "Description": Match.string_like_regexp("interruption"),
            },
        )
    }
    detach = [s for s in statements(template) if "autoscaling:DetachInstances" in as_list(s["Action"])]
    assert len(detach) == 1
    assert detach[0]["_roles"] == [role]
    assert detach[0]["Condition"] == {"StringEquals": {f"autoscaling:ResourceTag/{CLUSTER_TAG}": CLUSTER}}
    assert CLUSTER_TAG == "KubernetesCluster"
    assert detach[0]["Resource"] != "*"


def test_every_mutating_ec2_or_autoscaling_call_is_scoped_to_the_cluster_tag(template: Template) -> None:
    for statement in statements(template):
        if statement["Effect"] == "Deny":
            continue  # the group guard's Deny statements only narrow what the Allow statements give
        for action in as_list(statement["Action"]):
            service, verb = action.split(":", 1)
            if service in ("autoscaling", "ec2") and not verb.startswith(READ_ONLY_PREFIXES):
                # Auto Scaling calls by the group's tag; ec2:TerminateInstances by the instance's own tag
                assert statement["Condition"]["StringEquals"][f"{service}:ResourceTag/{CLUSTER_TAG}"] == CLUSTER


def test_unscopable_describe_calls_have_their_own_statement_on_star(template: Template) -> None:
    allowed = [s for s in statements(template) if s["Effect"] == "Allow"]
    everywhere = [s for s in allowed if "*" in as_list(s["Resource"])]
    # the agent's PutMetricData (no resource-level permissions) is scoped by its namespace condition instead
    [metrics] = [s for s in everywhere if as_list(s["Action"]) == ["cloudwatch:PutMetricData"]]
    assert metrics["Condition"] == {"StringEquals": {"cloudwatch:namespace": "NodeManager"}}
    star = [s for s in everywhere if s is not metrics]
    assert star, "the Describe calls must be allowed somewhere"
    for statement in star:
        assert all(a.split(":", 1)[1].startswith(READ_ONLY_PREFIXES) for a in as_list(statement["Action"]))
        assert "Condition" not in statement
        assert len(as_list(statement["Resource"])) == 1
    granted = {a for s in star for a in as_list(s["Action"])}
    assert {
        "autoscaling:DescribeAutoScalingInstances",
        "autoscaling:DescribeAutoScalingGroups",
        "ec2:DescribeInstances",
    } <= granted


def test_lambda_uses_table_and_queue_through_grants_on_those_resources_only(template: Template) -> None:
    queue_id, _ = queue_ids(template)
    table = state_table_id(template)
    by_action: dict[str, list[Any]] = {}
    for statement in statements(template):
        for action in as_list(statement["Action"]):
            if action.startswith(("dynamodb:", "sqs:")):
                by_action.setdefault(action, []).extend(as_list(statement["Resource"]))
    assert {"Fn::GetAtt": [queue_id, "Arn"]} in by_action["sqs:SendMessage"]
    assert {"Fn::GetAtt": [table, "Arn"]} in by_action["dynamodb:PutItem"]
    assert all(resource != "*" for resources in by_action.values() for resource in resources)
    assert not any(a.endswith("*") for a in by_action)
