"""configure-agent: the agent's settings from a stack's CloudFormation outputs (moto's CloudFormation), written into
agent.env without touching its other lines."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from cli.agentconf import StackOutputsError, stack_name_of, stack_settings, update_env_file
from cli.main import main

CHECKOUT_ENV = Path(__file__).resolve().parents[3] / "agent" / "deploy" / "default" / "agent.env"

TEMPLATE = {
    "Resources": {"Queue": {"Type": "AWS::SQS::Queue"}},
    "Outputs": {
        "AgentRoleArn": {"Value": "arn:aws:iam::123456789012:role/NodeManager-AgentRole"},
        "StateTableName": {"Value": "NodeManager-State"},
        "CommandQueueUrl": {"Value": {"Ref": "Queue"}},
    },
}


@pytest.fixture
def cfn(monkeypatch):
    for var in ("AWS_ENDPOINT_URL", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    with mock_aws():
        client = boto3.client("cloudformation", region_name="eu-west-1")
        client.create_stack(StackName="NodeManager-prod-k8s-local", TemplateBody=json.dumps(TEMPLATE))
        yield client


def test_the_settings_come_from_the_outputs_and_the_stack_region(cfn):
    settings = stack_settings(cfn, "NodeManager-prod-k8s-local", "prod.k8s.local")
    assert settings["AGENT_ROLE_ARN"] == "arn:aws:iam::123456789012:role/NodeManager-AgentRole"
    assert settings["TABLE_NAME"] == "NodeManager-State"
    assert settings["QUEUE_URL"].startswith("https://") and "eu-west-1" in settings["QUEUE_URL"]
    assert settings["AWS_REGION"] == "eu-west-1"
    assert settings["CLUSTER_NAME"] == "prod.k8s.local"


def test_a_missing_stack_is_one_error(cfn):
    with pytest.raises(StackOutputsError, match="cannot read stack Nope"):
        stack_settings(cfn, "Nope", "c")


def test_a_stack_without_the_outputs_is_refused(cfn):
    cfn.create_stack(StackName="Other", TemplateBody=json.dumps({"Resources": {"Q": {"Type": "AWS::SQS::Queue"}}}))
    with pytest.raises(StackOutputsError, match="AgentRoleArn"):
        stack_settings(cfn, "Other", "c")


def test_the_env_file_keeps_its_comments_and_other_settings(tmp_path):
    path = tmp_path / "agent.env"
    path.write_text(CHECKOUT_ENV.read_text())
    changed = update_env_file(path, {"TABLE_NAME": "T", "CLUSTER_NAME": "dev.k8s.local", "NEW_ONE": "1"})
    text = path.read_text()
    assert "TABLE_NAME=T\n" in text and "REPLACE-with-the-StateTableName" not in text
    assert "LOG_FORMAT=json" in text and text.startswith("# THE settings")
    assert text.endswith("NEW_ONE=1\n")
    assert sorted(changed) == ["NEW_ONE", "TABLE_NAME"]  # CLUSTER_NAME already had that value
    assert update_env_file(path, {"TABLE_NAME": "T"}) == []


def test_the_command_fills_the_checkout_file_copy(cfn, tmp_path):
    path = tmp_path / "agent.env"
    path.write_text(CHECKOUT_ENV.read_text())
    out: list[str] = []
    code = main(["configure-agent", "--env-file", str(path), "--cluster", "prod.k8s.local"], environ={}, out=out.append)
    assert code == 0, out
    text = path.read_text()
    assert "REPLACE" not in text
    assert "AWS_REGION=eu-west-1" in text and "CLUSTER_NAME=prod.k8s.local" in text
    assert "AGENT_ROLE_ARN" in out[0]


def test_the_command_reports_a_missing_stack_on_stderr(cfn, tmp_path):
    err: list[str] = []
    code = main(
        ["configure-agent", "--stack-name", "Nope", "--env-file", str(tmp_path / "a.env"), "--cluster", "c"],
        environ={},
        out=lambda line: None,
        err=err.append,
    )
    assert code == 1 and len(err) == 1 and "Nope" in err[0]


def test_the_default_stack_name_is_the_cdk_apps():
    from infra.config import ClusterConfig

    assert stack_name_of("prod.k8s.local") == ClusterConfig(name="prod.k8s.local", agent_trust_account=True).stack_name


def make_checkout(root: Path) -> Path:
    env = root / "agent" / "deploy" / "default" / "agent.env"
    env.parent.mkdir(parents=True)
    env.write_text(CHECKOUT_ENV.read_text())
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    return env


def test_the_default_env_file_is_the_current_checkouts(tmp_path, monkeypatch):
    # an installed CLI (its code in site-packages, which is no checkout) run from inside the operator's checkout
    import cli.main

    monkeypatch.setattr(cli.main, "CODE_ROOT", tmp_path / "site-packages")
    env = make_checkout(tmp_path / "clone")
    (tmp_path / "clone" / "docs").mkdir()
    assert cli.main.checkout_env_file(tmp_path / "clone" / "docs") == env
    assert cli.main.checkout_env_file(tmp_path) is None  # outside any checkout


def test_the_command_writes_the_current_checkouts_file(cfn, tmp_path, monkeypatch):
    import cli.main

    monkeypatch.setattr(cli.main, "CODE_ROOT", tmp_path / "site-packages")
    env = make_checkout(tmp_path / "clone")
    monkeypatch.chdir(tmp_path / "clone")
    out: list[str] = []
    assert main(["configure-agent", "--cluster", "prod.k8s.local"], environ={}, out=out.append) == 0, out
    assert "CLUSTER_NAME=prod.k8s.local" in env.read_text()
    assert out[0].startswith(str(env))
