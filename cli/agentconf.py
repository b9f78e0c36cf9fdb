"""``node-manager configure-agent``: fill the agent's kustomize settings (``agent/deploy/default/agent.env``) from a
deployed stack's CloudFormation outputs, so nothing is copied by hand.

Outputs read (``infra/stack.py``): ``AgentRoleArn`` -> ``AGENT_ROLE_ARN`` (the ServiceAccount's IRSA annotation),
``StateTableName`` -> ``TABLE_NAME``, ``CommandQueueUrl`` -> ``QUEUE_URL``; the region is the stack's (from its
``StackId`` ARN) -> ``AWS_REGION``; the cluster is the operator's ``--cluster`` -> ``CLUSTER_NAME``. Every other
line of the file (comments, ``LOG_FORMAT``, added settings) is kept as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

# stack output -> agent setting
OUTPUTS = {"AgentRoleArn": "AGENT_ROLE_ARN", "StateTableName": "TABLE_NAME", "CommandQueueUrl": "QUEUE_URL"}


def stack_name_of(cluster: str) -> str:
    """The stack the CDK app deploys for ``cluster`` (``infra.config``'s ``ClusterConfig.stack_name``, repeated here
    so the CLI does not import the CDK): ``NodeManager-<cluster name with dots as dashes>``."""
    return "NodeManager-" + cluster.replace(".", "-")


class StackOutputsError(Exception):
    """The stack is missing, not deployed, or lacks an output the agent needs."""


def stack_settings(cloudformation: Any, stack_name: str, cluster: str) -> dict[str, str]:
    """The agent's settings from ``DescribeStacks`` of ``stack_name`` (boto3 CloudFormation client).

    Returns:
        ``{"AGENT_ROLE_ARN", "TABLE_NAME", "QUEUE_URL", "AWS_REGION", "CLUSTER_NAME"}`` -> value.

    Raises:
        StackOutputsError: no such stack, or an output is missing (the stack predates it, or is not ours).
    """
    try:
        stacks = cloudformation.describe_stacks(StackName=stack_name)["Stacks"]
    # botocore's ClientError ("Stack with id ... does not exist"), missing credentials, a connection error: one line
    except Exception as err:
        raise StackOutputsError(f"cannot read stack {stack_name}: {err}") from err
    stack = stacks[0]
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
    missing = sorted(key for key in OUTPUTS if key not in outputs)
    if missing:
        raise StackOutputsError(f"stack {stack_name} has no output {', '.join(missing)} (is it node-manager's?)")
    settings = {var: outputs[key] for key, var in OUTPUTS.items()}
    # arn:aws:cloudformation:<region>:<account>:stack/<name>/<id>
    settings["AWS_REGION"] = stack["StackId"].split(":")[3]
    settings["CLUSTER_NAME"] = cluster
    return settings


def update_env_file(path: Path, settings: Mapping[str, str]) -> list[str]:
    """Set ``settings`` in the ``KEY=value`` file at ``path`` (created when missing): a key's line is replaced in
    place, keys not in the file are appended, every other line is kept.

    Returns:
        The keys whose value changed.
    """
    lines = path.read_text().splitlines() if path.exists() else []
    changed: list[str] = []
    seen: set[str] = set()
    out: list[str] = []
    for line in lines:
        key, sep, value = line.partition("=")
        key = key.strip()
        if sep and not line.lstrip().startswith("#") and key in settings:
            seen.add(key)
            if value != settings[key]:
                changed.append(key)
            out.append(f"{key}={settings[key]}")
        else:
            out.append(line)
    for key, value in settings.items():
        if key not in seen:
            out.append(f"{key}={value}")
            changed.append(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(out) + "\n")
    return changed
