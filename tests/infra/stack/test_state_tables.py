"""The stack's two DynamoDB tables: the state table as ``core.schema`` describes it (kept when the stack goes) and the
idempotency table of the Lambdas."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Match, Template

from core import schema
from tests.infra.stack.resources import state_table_id

pytestmark = pytest.mark.slow  # the package's one synth (tests/infra/stack/conftest.py): several seconds


def test_state_table_matches_core_schema(template: Template) -> None:
    expected = schema.state_table("x")
    template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "KeySchema": expected["KeySchema"],
            "AttributeDefinitions": Match.array_equals(expected["AttributeDefinitions"]),
            "BillingMode": expected["BillingMode"],
            "TimeToLiveSpecification": {"AttributeName": schema.TTL_ATTRIBUTE, "Enabled": True},
            "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
            "SSESpecification": {"SSEEnabled": True},
        },
    )


def test_state_table_is_kept_when_the_stack_goes(template: Template) -> None:
    resource = template.to_json()["Resources"][state_table_id(template)]
    assert resource["DeletionPolicy"] == "Retain"


def test_idempotency_table_matches_core_schema(template: Template) -> None:
    expected = schema.idempotency_table("x")
    template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "KeySchema": expected["KeySchema"],
            "AttributeDefinitions": expected["AttributeDefinitions"],
            "BillingMode": expected["BillingMode"],
            "TimeToLiveSpecification": {"AttributeName": "expiration", "Enabled": True},
            "SSESpecification": {"SSEEnabled": True},
        },
    )
    template.resource_count_is("AWS::DynamoDB::Table", 2)
