"""The synth-time checks are really wired into the app: cdk-nag's AwsSolutions pack and CDK's CloudFormation schema
validation both fail the synth on an unacknowledged finding, naming rule and resource."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aws_cdk import aws_sqs as sqs

from infra.application import build_app
from infra.nag import acknowledge

STACK = "NodeManager-nag-example-com"

pytestmark = pytest.mark.slow  # one synth


def test_unacknowledged_findings_fail_the_synth(tmp_path: Path) -> None:
    app = build_app({"clusters": [{"name": "nag.example.com", "agent_trust_account": True}]}, outdir=str(tmp_path))
    stack = app.node.find_child(STACK)
    sqs.Queue(stack, "Careless")  # no DLQ, no TLS enforcement
    function = stack.node.find_child("Interruption").node.find_child("Function")
    function.node.default_child.add_property_override("Timeout", "soon")  # not a valid template

    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()

    report = json.loads((tmp_path / "validation-report.json").read_text())
    found = {
        (plugin["pluginName"], violation["ruleName"], construct["constructPath"], violation["severity"])
        for plugin in report["pluginReports"]
        for violation in plugin["violations"]
        for construct in violation["violatingConstructs"]
    }
    assert found == {
        ("AwsSolutions", "AwsSolutions-SQS3", f"{STACK}/Careless/Resource", "error"),
        ("AwsSolutions", "AwsSolutions-SQS4", f"{STACK}/Careless/Resource", "error"),
        ("CloudFormation Validate", "F3012", f"{STACK}/Interruption/Function/Resource", "error"),
    }


def test_an_acknowledgement_needs_a_reason(tmp_path: Path) -> None:
    app = build_app({"clusters": [{"name": "nag.example.com", "agent_trust_account": True}]}, outdir=str(tmp_path))
    with pytest.raises(ValueError, match="needs a reason"):
        acknowledge(app.node.find_child(STACK), "AwsSolutions-SQS3", "  ")
