"""The agent's role (trusted by the account without OIDC; what it may read, write and put, evaluated against the
table's item keys) and the stack outputs the agent is configured from."""

from __future__ import annotations

import fnmatch
from typing import Any

import pytest
from aws_cdk.assertions import Template

from core import schema
from tests.infra.conftest import as_list, statements
from tests.infra.stack.resources import CLUSTER, STACK, agent_role_id, queue_ids, state_table_id

pytestmark = pytest.mark.slow  # the package's one synth (tests/infra/stack/conftest.py): several seconds


def test_agent_role_is_assumable_by_the_account_without_oidc(template: Template) -> None:
    role = template.to_json()["Resources"][agent_role_id(template)]["Properties"]
    (statement,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Action"] == "sts:AssumeRole"
    assert statement["Principal"]["AWS"] == {
        "Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":iam::111122223333:root"]]
    }


def test_agent_role_permissions(template: Template) -> None:
    role = {"Ref": agent_role_id(template)}
    queue_id, _ = queue_ids(template)
    granted: dict[str, list[Any]] = {}
    for statement in statements(template):
        if role in statement["_roles"]:
            for action in as_list(statement["Action"]):
                granted.setdefault(action, []).extend(as_list(statement["Resource"]))
    for action in ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"):
        assert granted[action] == [{"Fn::GetAtt": [queue_id, "Arn"]}]
    for action in ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:Query"):
        assert granted[action] and all(r == {"Fn::GetAtt": [state_table_id(template), "Arn"]} for r in granted[action])
    (bus,) = granted["events:PutEvents"]
    assert bus == {
        "Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":events:eu-west-1:111122223333:event-bus/default"]]
    }
    assert granted["autoscaling:DescribeAutoScalingInstances"] == ["*"]
    assert "sqs:SendMessage" not in granted and "autoscaling:DetachInstances" not in granted


def dynamodb_allowed(mine: list[dict[str, Any]], table: Any, action: str, pk: str | None) -> bool:
    """Whether ``mine`` (IAM statements) allow ``action`` on ``table`` for a request whose partition key is ``pk``
    (None: a request naming none, a Scan). Evaluates what the stack writes: ``Allow`` and ``Deny`` statements,
    ``Action`` with wildcards, ``Resource`` equal to the table or ``*``, and the ``ForAllValues:StringEquals``
    condition on ``dynamodb:LeadingKeys`` (every value of the request's set among the allowed ones; an empty set
    matches, as in IAM). Any other condition on a table statement fails the test rather than being guessed."""

    def matches(statement: dict[str, Any]) -> bool:
        if not any(fnmatch.fnmatchcase(action, a) for a in as_list(statement["Action"])):
            return False
        if not any(r in ("*", table) for r in as_list(statement["Resource"])):
            return False
        for operator, keys in statement.get("Condition", {}).items():
            assert operator == "ForAllValues:StringEquals" and set(keys) == {"dynamodb:LeadingKeys"}, statement
            if pk is not None and pk not in as_list(keys["dynamodb:LeadingKeys"]):
                return False
        return True

    hits = [s for s in mine if matches(s)]
    return any(s["Effect"] == "Allow" for s in hits) and not any(s["Effect"] == "Deny" for s in hits)


WRITES = ("dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:ConditionCheckItem")


def test_the_agents_role_writes_only_its_own_item_kinds(template: Template) -> None:
    """The synthesized policy, evaluated against item keys: the agent's kinds (``NODE#``, ``MEMBERSHIP``, ``CMD#``,
    ``HOOK#``, ``CPDRAIN#``) can be written; ``LOCK``, ``COMP#``, ``RUN#``, ``DETACH#`` and ``POLL#`` cannot (nor
    anything of another cluster, nor through a call without a partition key), nor even read: the policy names only the
    agent's partition in ``dynamodb:LeadingKeys``."""
    role = {"Ref": agent_role_id(template)}
    mine = [s for s in statements(template) if role in s["_roles"]]
    table = {"Fn::GetAtt": [state_table_id(template), "Arn"]}
    for sk in ("NODE#i-1", "MEMBERSHIP", "CMD#spot-1", "HOOK#i-1", "CPDRAIN#0"):
        pk = schema.partition_for(CLUSTER, sk)
        assert pk == schema.agent_partition_of(CLUSTER)
        for action in ("dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:UpdateItem"):
            assert dynamodb_allowed(mine, table, action, pk), (action, sk)
    for sk in ("LOCK", "COMP#nodes-a", "RUN#20240101T000000Z-000001", "DETACH#i-1", "POLL#r"):
        pk = schema.partition_for(CLUSTER, sk)
        assert pk == schema.partition_of(CLUSTER)
        for action in (*WRITES, "dynamodb:GetItem", "dynamodb:Query", "dynamodb:BatchWriteItem"):
            assert not dynamodb_allowed(mine, table, action, pk), (action, sk)
    leading = [
        key
        for s in mine
        for keys in s.get("Condition", {}).values()
        for key in as_list(keys.get("dynamodb:LeadingKeys", []))
    ]
    assert leading and set(leading) == {schema.agent_partition_of(CLUSTER)}
    other = schema.agent_partition_of("other.k8s.example.com")
    for action in (*WRITES, "dynamodb:GetItem", "dynamodb:Query"):
        assert not dynamodb_allowed(mine, table, action, other), action
    for action in ("dynamodb:Scan", "dynamodb:BatchWriteItem", "dynamodb:PartiQLUpdate", "dynamodb:DeleteTable"):
        assert not dynamodb_allowed(mine, table, action, None), action


def test_the_agent_puts_only_its_own_events(template: Template) -> None:
    role = {"Ref": agent_role_id(template)}
    mine = [s for s in statements(template) if role in s["_roles"]]
    (events,) = [s for s in mine if "events:PutEvents" in as_list(s["Action"])]
    assert events["Condition"] == {"StringEquals": {"events:source": "node-manager.agent"}}


def test_outputs(template: Template) -> None:
    template.has_output("AgentRoleArn", {"Value": {"Fn::GetAtt": [agent_role_id(template), "Arn"]}})
    template.has_output("CommandQueueUrl", {"Value": {"Ref": queue_ids(template)[0]}})
    template.has_output("StateTableName", {"Value": {"Ref": state_table_id(template)}})


def test_the_outputs_configure_agent_reads_are_the_stacks(template: Template) -> None:
    """``node-manager configure-agent`` reads these outputs of the stack named after the cluster."""
    from cli.agentconf import OUTPUTS, stack_name_of

    assert set(OUTPUTS) <= set(template.to_json()["Outputs"])
    assert stack_name_of(CLUSTER) == STACK
