"""The stack under test in this package: one cluster with the default unit options (arm64, AWS managed encryption,
no OIDC), its context, and how the tests find its resources in the synthesized template."""

from __future__ import annotations

from typing import Any

from aws_cdk.assertions import Match, Template

from core import schema
from infra.interruption import HANDLER
from tests.infra.conftest import only

CLUSTER = "prod.k8s.example.com"
STACK = "NodeManager-prod-k8s-example-com"
CONTEXT = {
    "clusters": [
        {
            "name": CLUSTER,
            "agent_trust_account": True,  # the account trust is tested here
            "account": "111122223333",
            "region": "eu-west-1",
            "rebalance_policy": "drain",
            "spot_deadline_seconds": 100,
            "early_replacement": False,
            "rebalance_drain_timeout_seconds": 300,
            "log_retention_days": 14,
            "log_level": "DEBUG",
            "reserved_concurrency": 3,
            "event_retry_attempts": 2,
            "event_max_age_seconds": 90,
        }
    ]
}
READ_ONLY_PREFIXES = ("Describe", "List", "Get")


def logical_id(template: Template, resource_type: str, props: dict[str, Any] | None = None) -> str:
    return only(template.find_resources(resource_type, {"Properties": props} if props else None))[0]


def state_table_id(template: Template) -> str:
    return logical_id(
        template,
        "AWS::DynamoDB::Table",
        {"TimeToLiveSpecification": {"AttributeName": schema.TTL_ATTRIBUTE, "Enabled": True}},
    )


def function_id(template: Template) -> str:
    """The interruption Lambda (the replenisher's has its own tests in tests/infra/test_replenisher_stack.py)."""
    return logical_id(template, "AWS::Lambda::Function", {"Handler": HANDLER})


def queue_ids(template: Template) -> tuple[str, str]:
    """(command queue, its dead-letter queue)."""
    queue_id, queue = only(
        template.find_resources("AWS::SQS::Queue", {"Properties": {"RedrivePolicy": Match.any_value()}})
    )
    return queue_id, queue["Properties"]["RedrivePolicy"]["deadLetterTargetArn"]["Fn::GetAtt"][0]


def agent_role_id(template: Template) -> str:
    return logical_id(template, "AWS::IAM::Role", {"Description": Match.string_like_regexp("agent")})
