"""Helpers for the CDK tests: synthesize an app once per module and look into the cloud assembly.

A synth runs the real local bundling (pip for the Lambda's platform, cached under
``~/.cache/aws-node-manager/lambda-deps``) and the cdk-nag checks, as ``python app.py`` does.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# jsii prints a banner on every start under node 20 (past its end of life); it changes nothing here.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from aws_cdk import App, Stack
from aws_cdk.assertions import Template

from infra.application import build_app

ELF_MACHINES = {"arm64": 183, "x86_64": 62}  # e_machine: EM_AARCH64, EM_X86_64


@dataclass
class Synthesis:
    app: App
    outdir: Path

    def stack(self, name: str) -> Stack:
        child = self.app.node.find_child(name)
        assert isinstance(child, Stack)
        return child

    def template(self, name: str) -> Template:
        return Template.from_stack(self.stack(name))

    def template_json(self, name: str) -> dict[str, Any]:
        return json.loads((self.outdir / f"{name}.template.json").read_text())

    def validation_report(self) -> dict[str, Any]:
        return json.loads((self.outdir / "validation-report.json").read_text())

    def function_asset_dir(self, stack_name: str, function_logical_id: str) -> Path:
        """The staged folder of a Lambda's code asset, found through the stack's asset manifest."""
        template = self.template_json(stack_name)
        object_key = template["Resources"][function_logical_id]["Properties"]["Code"]["S3Key"]
        manifest = json.loads((self.outdir / f"{stack_name}.assets.json").read_text())
        for entry in manifest["files"].values():
            if any(dest["objectKey"] == object_key for dest in entry["destinations"].values()):
                return self.outdir / entry["source"]["path"]
        raise AssertionError(f"no asset with object key {object_key}")


def synthesize(context: dict[str, Any], outdir: Path) -> Synthesis:
    """Build the app from ``context`` and synthesize it (cdk-nag runs; any unacknowledged finding raises)."""
    app = build_app(context, outdir=str(outdir))
    app.synth()
    return Synthesis(app=app, outdir=outdir)


def only(resources: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The single (logical id, resource) of a ``Template.find_resources`` result."""
    assert len(resources) == 1, sorted(resources)
    return next(iter(resources.items()))


def statements(template: Template) -> list[dict[str, Any]]:
    """Every statement of every AWS::IAM::Policy, with ``_policy`` (logical id) and ``_roles`` added."""
    out = []
    for logical_id, policy in template.find_resources("AWS::IAM::Policy").items():
        props = policy["Properties"]
        for statement in props["PolicyDocument"]["Statement"]:
            out.append({**statement, "_policy": logical_id, "_roles": props.get("Roles", [])})
    return out


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def elf_machine(path: Path) -> int:
    header = path.read_bytes()[:20]
    assert header[:4] == b"\x7fELF", path
    return int.from_bytes(header[18:20], "little")
