"""One app, two clusters, the other unit options: one stack each, synthesized once.

- ``kms.example.com``: x86_64, a customer managed key, X-Ray tracing, IRSA trust, no reserved concurrency.
- ``byo.example.com``: the agent's role exists already (its ARN is given).
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

import boto3
import pytest
from aws_cdk import Stack
from aws_cdk.assertions import Match, Template

from infra.interruption import HANDLER

from .conftest import ELF_MACHINES, Synthesis, as_list, elf_machine, only, statements, synthesize

KMS_STACK = "NodeManager-kms-example-com"
BYO_STACK = "NodeManager-byo-example-com"
ISSUER = "oidc.example.com/id/ABC123"
PROVIDER_ARN = f"arn:aws:iam::111122223333:oidc-provider/{ISSUER}"
AGENT_ROLE_ARN = "arn:aws:iam::111122223333:role/platform/node-manager-agent"
CONTEXT = {
    "clusters": [
        {
            "name": "kms.example.com",
            "account": "111122223333",
            "region": "us-east-1",
            "lambda_architecture": "x86_64",
            "encryption": "kms",
            "tracing": True,
            "reserved_concurrency": 0,
            "rebalance_policy": "ignore",
            "agent_oidc_provider_arn": PROVIDER_ARN,
            "agent_service_account": "node-manager:agent",
        },
        {"name": "byo.example.com", "agent_role_arn": AGENT_ROLE_ARN},
    ]
}

pytestmark = pytest.mark.slow  # one synth of two stacks


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesis:
    return synthesize(CONTEXT, tmp_path_factory.mktemp("cdk.out"))


@pytest.fixture(scope="module")
def kms(synth: Synthesis) -> Template:
    return synth.template(KMS_STACK)


@pytest.fixture(scope="module")
def byo(synth: Synthesis) -> Template:
    return synth.template(BYO_STACK)


def key_id(template: Template) -> str:
    return only(template.find_resources("AWS::KMS::Key"))[0]


def function(template: Template) -> tuple[str, dict[str, Any]]:
    """The interruption Lambda (the replenisher shares its asset)."""
    return only(
        template.find_resources(
            "AWS::Lambda::Function", {"Properties": {"Handler": "lambdas.interruption.handler.lambda_handler"}}
        )
    )


def test_one_stack_per_cluster_with_its_own_environment(synth: Synthesis) -> None:
    stacks = {c.node.id for c in synth.app.node.children if isinstance(c, Stack)}
    assert stacks == {KMS_STACK, BYO_STACK}
    assert (synth.stack(KMS_STACK).account, synth.stack(KMS_STACK).region) == ("111122223333", "us-east-1")
    assert synth.validation_report()["pluginReports"] == []


def test_customer_managed_key_is_rotated_and_encrypts_tables_and_queues(kms: Template) -> None:
    key = key_id(kms)
    kms.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})
    tables = kms.find_resources("AWS::DynamoDB::Table")
    assert len(tables) == 2
    for table in tables.values():
        assert table["Properties"]["SSESpecification"] == {
            "SSEEnabled": True,
            "SSEType": "KMS",
            "KMSMasterKeyId": {"Fn::GetAtt": [key, "Arn"]},
        }
    queues = kms.find_resources("AWS::SQS::Queue")
    assert len(queues) == 5  # commands, their DLQ, one rules' DLQ per Lambda
    for queue in queues.values():
        assert queue["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key, "Arn"]}
        assert "SqsManagedSseEnabled" not in queue["Properties"]


def test_eventbridge_may_use_the_key_for_the_dead_letter_queue_of_its_rules_only(kms: Template) -> None:
    kms.has_resource_properties(
        "AWS::KMS::Key",
        {
            "KeyPolicy": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Principal": {"Service": "events.amazonaws.com"},
                                "Action": ["kms:GenerateDataKey", "kms:Decrypt"],
                                "Condition": {
                                    "ArnLike": {
                                        "aws:SourceArn": {
                                            "Fn::Join": [
                                                "",
                                                [
                                                    "arn:",
                                                    {"Ref": "AWS::Partition"},
                                                    ":events:us-east-1:111122223333:rule/*",
                                                ],
                                            ]
                                        }
                                    },
                                    "StringEquals": {"aws:SourceAccount": "111122223333"},
                                },
                            }
                        ),
                    ]
                )
            }
        },
    )


def test_every_service_statement_of_the_key_policy_names_the_account(kms: Template) -> None:
    """Confused deputy: a service principal may use the key only on behalf of this account's resources."""
    (key,) = kms.find_resources("AWS::KMS::Key").values()
    services = [s for s in key["Properties"]["KeyPolicy"]["Statement"] if "Service" in s.get("Principal", {})]
    assert services
    for statement in services:
        assert statement["Condition"]["StringEquals"]["aws:SourceAccount"] == "111122223333"
        assert "aws:SourceArn" in statement["Condition"]["ArnLike"]


def test_key_grants_name_exact_actions(kms: Template) -> None:
    key = {"Fn::GetAtt": [key_id(kms), "Arn"]}
    kms_actions = {a for s in statements(kms) for a in as_list(s["Action"]) if a.startswith("kms:")}
    assert kms_actions == {"kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey"}
    for statement in statements(kms):
        if any(a.startswith("kms:") for a in as_list(statement["Action"])):
            assert as_list(statement["Resource"]) == [key]


def test_x86_64_tracing_and_no_reservation(kms: Template) -> None:
    _, fn = function(kms)
    props = fn["Properties"]
    assert props["Architectures"] == ["x86_64"]
    assert props["TracingConfig"] == {"Mode": "Active"}
    assert "ReservedConcurrentExecutions" not in props
    assert "POWERTOOLS_TRACE_DISABLED" not in props["Environment"]["Variables"]
    assert props["Environment"]["Variables"]["REBALANCE_POLICY"] == "ignore"


def test_x86_64_asset_carries_x86_64_cpython_312_wheels(synth: Synthesis, kms: Template) -> None:
    asset: Path = synth.function_asset_dir(KMS_STACK, function(kms)[0])
    (pydantic_core,) = asset.glob("pydantic_core/_pydantic_core*.so")
    assert pydantic_core.name == "_pydantic_core.cpython-312-x86_64-linux-gnu.so"
    assert {elf_machine(so) for so in asset.rglob("*.so")} == {ELF_MACHINES["x86_64"]}


def test_agent_role_trusts_only_the_agents_service_account(kms: Template) -> None:
    role = only(
        kms.find_resources("AWS::IAM::Role", {"Properties": {"Description": Match.string_like_regexp("agent")}})
    )[1]
    (statement,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Action"] == "sts:AssumeRoleWithWebIdentity"
    assert statement["Principal"] == {"Federated": PROVIDER_ARN}
    assert statement["Condition"] == {
        "StringEquals": {
            f"{ISSUER}:sub": "system:serviceaccount:node-manager:agent",
            # kOps' audience (its IAM OIDC provider's only client ID; the pod-identity-webhook's --token-audience)
            f"{ISSUER}:aud": "amazonaws.com",
        }
    }


def test_existing_agent_role_gets_the_policies_and_is_the_output(byo: Template) -> None:
    roles = byo.find_resources("AWS::IAM::Role")
    descriptions = sorted(role["Properties"]["Description"] for role in roles.values())
    # the Lambdas' (interruption, replenisher, refresher) and the refresher's operator role: no agent role is made
    assert len(roles) == 4 and not any("agent" in d for d in descriptions), descriptions
    # IAM attaches inline policies by role name (the path is not part of it).
    agent_statements = [s for s in statements(byo) if s["_roles"] == ["node-manager-agent"]]
    actions = {a for s in agent_statements for a in as_list(s["Action"])}
    assert {
        "sqs:ReceiveMessage",
        "sqs:DeleteMessage",
        "sqs:ChangeMessageVisibility",
        "dynamodb:PutItem",
        "events:PutEvents",
        "autoscaling:DescribeAutoScalingInstances",
    } <= actions
    byo.has_output("AgentRoleArn", {"Value": AGENT_ROLE_ARN})


# The Lambda runtime's own packages (https://docs.aws.amazon.com/lambda/latest/dg/lambda-python.html): boto3 and
# what it imports. Taken from this venv (pure Python) to stand in for the runtime.
RUNTIME_PROVIDED = ("boto3", "botocore", "s3transfer", "dateutil", "urllib3", "six.py")


def python_312() -> str | None:
    """A CPython 3.12 interpreter: on PATH (not a pyenv shim, which may refuse), else a pyenv version."""
    found = shutil.which("python3.12")
    if found and "/shims/" not in found:
        return found
    candidates = sorted(Path.home().glob(".pyenv/versions/3.12*/bin/python3.12"))
    return str(candidates[-1]) if candidates else None


def test_the_asset_for_this_machines_architecture_imports_its_handler_under_cpython_312(
    synth: Synthesis, kms: Template, byo: Template, tmp_path: Path
) -> None:
    """Only the asset plus the runtime's boto3 on the path, in an isolated CPython 3.12: the x86_64 variant on an
    x86_64 machine, the default arm64 stack on an aarch64 one (a wheel for the other architecture cannot load)."""
    interpreter = python_312()
    assert interpreter is not None, "this test needs a CPython 3.12 interpreter (python3.12 on PATH or pyenv 3.12)"
    stacks = {"x86_64": (KMS_STACK, kms), "aarch64": (BYO_STACK, byo)}
    assert platform.machine() in stacks, f"no Lambda architecture matches this machine ({platform.machine()})"
    stack, template = stacks[platform.machine()]
    asset = synth.function_asset_dir(stack, function(template)[0])
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    site_packages = Path(boto3.__file__).parent.parent
    for name in RUNTIME_PROVIDED:
        (runtime / name).symlink_to(site_packages / name)
    module, attribute = HANDLER.rsplit(".", 1)
    script = (
        f"import sys; sys.path[:0] = [{str(asset)!r}, {str(runtime)!r}]; "
        f"import importlib; handler = getattr(importlib.import_module({module!r}), {attribute!r}); "
        "import pydantic_core; print(callable(handler), pydantic_core.__file__)"
    )
    result = subprocess.run(
        [interpreter, "-I", "-S", "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": os.environ.get("PATH", ""), "AWS_DEFAULT_REGION": "us-east-1"},
    )
    assert result.returncode == 0, result.stderr
    is_callable, loaded_from = result.stdout.split()
    assert is_callable == "True"
    assert loaded_from.startswith(str(asset))
