"""Builds the CDK app: one ``NodeManagerStack`` per configured cluster, checked by cdk-nag's AwsSolutions pack.

Context comes from ``cdk.json`` (read here, so ``python app.py`` works without the CDK CLI) and is overridden by
whatever the CDK CLI passes (``CDK_CONTEXT_JSON``: ``-c`` flags, ``cdk.context.json``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aws_cdk import App, Environment, Tags

from infra.bundling import PROJECT_ROOT, DependencyCache
from infra.config import ClusterConfig, DeploymentConfig, load_config
from infra.nag import add_checks
from infra.stack import NodeManagerStack

# Make the built-in CloudFormation schema validation (run at synth) fail the synth instead of only warning.
STRICT_TEMPLATE_VALIDATION = "@aws-cdk/core:validateAgainstDefaultRules"


def read_cdk_json_context(path: Path = PROJECT_ROOT / "cdk.json") -> dict[str, Any]:
    """The ``"context"`` object of ``cdk.json`` (empty when the file or the key is missing)."""
    if not path.is_file():
        return {}
    context = json.loads(path.read_text(encoding="utf-8")).get("context", {})
    if not isinstance(context, dict):
        raise ValueError(f"{path}: 'context' must be an object")
    return context


def environment_of(cluster: ClusterConfig) -> Environment:
    """The stack's account/region: the cluster's, else the CLI's defaults, else environment-agnostic."""
    return Environment(
        account=cluster.account or os.environ.get("CDK_DEFAULT_ACCOUNT"),
        region=cluster.region or os.environ.get("CDK_DEFAULT_REGION"),
    )


def build_app(
    context: Mapping[str, Any] | None = None,
    *,
    outdir: str | None = None,
    project_root: Path = PROJECT_ROOT,
    dependency_cache: DependencyCache | None = None,
) -> App:
    """The app with one stack per cluster of ``context`` (default: ``cdk.json``'s context).

    Synthesizing the app runs cdk-nag's AwsSolutions pack and CDK's CloudFormation schema validation; any
    unacknowledged finding of either fails ``app.synth()`` (``RuntimeError``, report in
    ``<outdir>/validation-report.json``).

    Raises:
        core.exceptions.SettingsError: the ``clusters`` context is missing or invalid (names the key).
    """
    defaults = read_cdk_json_context(project_root / "cdk.json") if context is None else dict(context)
    defaults.setdefault(STRICT_TEMPLATE_VALIDATION, True)
    if outdir is None and "CDK_OUTDIR" not in os.environ:
        outdir = str(project_root / "cdk.out")
    app = App(context=defaults, outdir=outdir)
    # The CLI's context (CDK_CONTEXT_JSON) has been merged over the defaults by App: read the result.
    clusters = app.node.try_get_context("clusters")
    config: DeploymentConfig = load_config({} if clusters is None else {"clusters": clusters})
    for cluster in config.clusters:
        stack = NodeManagerStack(
            app,
            cluster.stack_name,
            cluster=cluster,
            env=environment_of(cluster),
            project_root=project_root,
            dependency_cache=dependency_cache,
            description=f"node-manager for kOps cluster {cluster.name}",
        )
        Tags.of(stack).add("node-manager/cluster", cluster.name)
    add_checks(app)
    return app
