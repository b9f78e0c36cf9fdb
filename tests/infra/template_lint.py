"""Run the IAM policy linter (parliament) and cfn-lint over a synthesized template, each finding either fixed or
acknowledged here with its reason.

parliament reads plain policy JSON, so CloudFormation's intrinsics are resolved first to ARNs of the right shape for
the resource they name (``Fn::GetAtt [id, Arn]`` / ``Ref`` by the resource's type; the pseudo parameters to a sample
account and region): what parliament checks is the actions, the resource formats they need and the conditions.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ACCOUNT, REGION = "111122223333", "us-east-1"
PSEUDO = {"AWS::Partition": "aws", "AWS::Region": REGION, "AWS::AccountId": ACCOUNT, "AWS::URLSuffix": "amazonaws.com"}
# ARN of a resource of the template by its CloudFormation type (what GetAtt Arn, or Ref for the types whose Ref is
# their ARN, gives); {id} is the logical id, standing in for the physical name.
ARN_FORMATS = {
    "AWS::DynamoDB::Table": "arn:aws:dynamodb:{region}:{account}:table/{id}",
    "AWS::SQS::Queue": "arn:aws:sqs:{region}:{account}:{id}",
    "AWS::Lambda::Function": "arn:aws:lambda:{region}:{account}:function:{id}",
    "AWS::Logs::LogGroup": "arn:aws:logs:{region}:{account}:log-group:{id}:*",
    "AWS::KMS::Key": "arn:aws:kms:{region}:{account}:key/{id}",
    "AWS::IAM::Role": "arn:aws:iam::{account}:role/{id}",
    "AWS::SNS::Topic": "arn:aws:sns:{region}:{account}:{id}",
    "AWS::Events::Rule": "arn:aws:events:{region}:{account}:rule/{id}",
}

# parliament findings acknowledged, by (policy logical id prefix, issue): the reason.
ACKNOWLEDGED: dict[tuple[str, str], str] = {}


def resolve(value: Any, resources: dict[str, Any]) -> Any:
    """``value`` with CloudFormation intrinsics replaced by plain strings (see the module docstring)."""
    if isinstance(value, dict):
        if "Fn::GetAtt" in value:
            logical_id, attribute = value["Fn::GetAtt"]
            if attribute != "Arn":
                return f"{logical_id}.{attribute}"
            return _arn(logical_id, resources)
        if "Ref" in value:
            ref = value["Ref"]
            if ref in PSEUDO:
                return PSEUDO[ref]
            kind = resources.get(ref, {}).get("Type")
            return _arn(ref, resources) if kind in ("AWS::SNS::Topic",) else ref
        if "Fn::Join" in value:
            separator, parts = value["Fn::Join"]
            return separator.join(str(resolve(part, resources)) for part in parts)
        return {key: resolve(child, resources) for key, child in value.items()}
    if isinstance(value, list):
        return [resolve(child, resources) for child in value]
    return value


def _arn(logical_id: str, resources: dict[str, Any]) -> str:
    kind = resources[logical_id]["Type"]
    return ARN_FORMATS[kind].format(region=REGION, account=ACCOUNT, id=logical_id)


def policy_documents(template: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(logical id, resolved document) of every identity policy of the template (``AWS::IAM::Policy`` and a role's
    inline ``Policies``)."""
    resources = template["Resources"]
    out = []
    for logical_id, resource in resources.items():
        props = resource.get("Properties", {})
        if resource["Type"] == "AWS::IAM::Policy":
            out.append((logical_id, resolve(props["PolicyDocument"], resources)))
        elif resource["Type"] == "AWS::IAM::Role":
            out += [(logical_id, resolve(p["PolicyDocument"], resources)) for p in props.get("Policies", [])]
    return out


def parliament_findings(template: dict[str, Any]) -> list[str]:
    """parliament's findings on every identity policy, less the acknowledged ones, as ``<policy>: <issue> ...``."""
    from parliament import analyze_policy_string

    found = []
    for logical_id, document in policy_documents(template):
        for finding in analyze_policy_string(json.dumps(document)).findings:
            if any(logical_id.startswith(p) and finding.issue == i for p, i in ACKNOWLEDGED):
                continue
            found.append(f"{logical_id}: {finding.issue} {finding.severity} {finding.detail}")
    return found


# cfn-lint rules acknowledged: rule id -> reason (passed as --ignore-checks).
CFN_LINT_ACKNOWLEDGED = {
    "W3005": "CDK adds DependsOn from a Lambda function to its role's default policy (so the function never runs "
    "without its permissions) although a GetAtt already orders it after the role: redundant, harmless.",
}


def cfn_lint(template_path: Path) -> list[str]:
    """cfn-lint's findings on ``template_path`` (every rule but ``CFN_LINT_ACKNOWLEDGED``), one line each."""
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from cfnlint.runner import main; sys.exit(main())",
            "--format",
            "parseable",
            "--ignore-checks",
            *CFN_LINT_ACKNOWLEDGED,
            "--",
            str(template_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return [line for line in (out.stdout + out.stderr).splitlines() if line.strip()]
