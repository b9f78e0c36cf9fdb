"""The synthesized templates pass tools made for them, besides cdk-nag: cfn-lint (CloudFormation) and parliament
(IAM policies), every acknowledged finding with its reason (``template_lint``). Both stacks of the variants' context:
a customer managed key with IRSA, and an existing agent role."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("cfnlint", reason="cfn-lint (requirements-lint.txt) is not installed")
pytest.importorskip("parliament", reason="parliament (requirements-lint.txt) is not installed")

from .conftest import Synthesis, synthesize
from .template_lint import ACKNOWLEDGED, CFN_LINT_ACKNOWLEDGED, cfn_lint, parliament_findings
from .test_stack_variants import BYO_STACK, CONTEXT, KMS_STACK

pytestmark = pytest.mark.slow  # one synth of two stacks, then the linters

STACKS = (KMS_STACK, BYO_STACK)


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesis:
    return synthesize(CONTEXT, tmp_path_factory.mktemp("cdk.out"))


@pytest.mark.parametrize("stack", STACKS)
def test_parliament_finds_nothing_in_the_identity_policies(synth: Synthesis, stack: str) -> None:
    assert parliament_findings(synth.template_json(stack)) == []


def test_parliament_would_find_a_bad_statement() -> None:
    """The check can fail: a SendMessage on a table ARN and an unknown action are reported."""
    template = {
        "Resources": {
            "Table": {"Type": "AWS::DynamoDB::Table", "Properties": {}},
            "Bad": {
                "Type": "AWS::IAM::Policy",
                "Properties": {
                    "PolicyDocument": {
                        "Version": "2012-10-17",
                        "Statement": [
                            {
                                "Effect": "Allow",
                                "Action": "sqs:SendMessage",
                                "Resource": {"Fn::GetAtt": ["Table", "Arn"]},
                            },
                            {"Effect": "Allow", "Action": "dynamodb:PutItems", "Resource": "*"},
                        ],
                    }
                },
            },
        }
    }
    issues = " ".join(parliament_findings(template))
    assert "RESOURCE_MISMATCH" in issues and "UNKNOWN_ACTION" in issues, issues


@pytest.mark.parametrize("stack", STACKS)
def test_cfn_lint_finds_nothing(synth: Synthesis, stack: str) -> None:
    assert cfn_lint(synth.outdir / f"{stack}.template.json") == []


def test_cfn_lint_would_find_a_bad_template(tmp_path) -> None:  # type: ignore[no-untyped-def]  # pytest fixture
    path = tmp_path / "bad.template.json"
    path.write_text(json.dumps({"Resources": {"Q": {"Type": "AWS::SQS::Queue", "Properties": {"Bogus": 1}}}}))
    assert any("E3002" in line or "Bogus" in line for line in cfn_lint(path))


def test_every_acknowledgement_says_why() -> None:
    for reason in [*ACKNOWLEDGED.values(), *CFN_LINT_ACKNOWLEDGED.values()]:
        assert len(reason) > 40
