"""The agent's IRSA role trusts the token audience it is given (infra/agent.py), without a whole-stack synth."""

from __future__ import annotations

import pytest
from aws_cdk import App, Stack
from aws_cdk.assertions import Template

from infra.agent import AgentIdentity

ISSUER = "oidc.example.com/id/ABC123"
PROVIDER_ARN = f"arn:aws:iam::111122223333:oidc-provider/{ISSUER}"


def trust_condition(**kwargs: str) -> object:
    stack = Stack(App(), "AgentOnly")
    AgentIdentity(stack, "Agent", oidc_provider_arn=PROVIDER_ARN, oidc_issuer=ISSUER, **kwargs)
    (role,) = Template.from_stack(stack).find_resources("AWS::IAM::Role").values()
    (statement,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    return statement["Condition"]["StringEquals"]


@pytest.mark.parametrize(
    ("kwargs", "audience"),
    [
        ({}, "amazonaws.com"),  # kOps' IAM OIDC provider client ID and pod-identity-webhook token audience
        ({"audience": "sts.amazonaws.com"}, "sts.amazonaws.com"),  # EKS'
    ],
)
def test_the_role_trusts_the_given_token_audience(kwargs: dict[str, str], audience: str) -> None:
    assert trust_condition(**kwargs) == {
        f"{ISSUER}:sub": "system:serviceaccount:node-manager:agent",
        f"{ISSUER}:aud": audience,
    }
