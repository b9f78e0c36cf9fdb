"""The operator CLI's arguments: ``parser()`` (the commands and options ``cli.main``'s docstring lists) and the
environment its ``--help`` shows."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

ENVIRONMENT_HELP = """environment:
  CLUSTER_NAME             the kOps cluster (default of --cluster)
  REFRESHER_FUNCTION_NAME  the deployed refresher Lambda (default of --function-name)
  AWS_REGION, AWS_PROFILE, AWS_* credentials   the AWS SDK's default chain (AWS_REGION or AWS_DEFAULT_REGION)
  AWS_ENDPOINT_URL         a local endpoint (the local world's moto server; printed by `local up`)
  --local and plan run the Lambdas' code here and read their settings as the deployed functions do:
  TABLE_NAME, QUEUE_URL (required), ACCOUNT_ID, REFRESH_*, and the rest of README "Settings".

exit codes: 0 done, 1 refused/rejected/failed, 2 usage or configuration error, 130 interrupted."""


def _global_options(p: argparse.ArgumentParser, suppress: bool) -> None:
    """The options accepted before and after the command. On the subcommands their default is SUPPRESS, so a value
    given before the command is not overwritten by the subcommand's default."""

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    g = p.add_argument_group("global options")
    g.add_argument("--cluster", default=default(None), help="kOps cluster name (default CLUSTER_NAME)")
    g.add_argument(
        "--function-name", default=default(None), help="deployed refresher Lambda (default REFRESHER_FUNCTION_NAME)"
    )
    g.add_argument(
        "--local",
        action="store_true",
        default=default(False),
        help="run the refresher's handler in this process (AWS_ENDPOINT_URL, settings from the environment)",
    )
    g.add_argument("--output", choices=("text", "json"), default=default("text"), help="text (default) or json")
    g.add_argument(
        "--json",
        dest="output",
        action="store_const",
        const="json",
        default=default("text"),
        help="same as --output json",
    )


def _at_least_one(text: str) -> int:
    """argparse ``type`` for a count of workers: an integer >= 1 (a group's MinSize cannot be negative)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: give a number of workers of 1 or more")
    return value


def parser() -> argparse.ArgumentParser:
    """The argument parser (global options anywhere; ``--help`` lists the environment it reads)."""
    fmt = argparse.RawDescriptionHelpFormatter
    p = argparse.ArgumentParser(
        prog="node-manager", description="Operate node-manager.", epilog=ENVIRONMENT_HELP, formatter_class=fmt
    )
    _global_options(p, suppress=False)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help: str) -> argparse.ArgumentParser:
        cmd = sub.add_parser(name, help=help, description=help, epilog=ENVIRONMENT_HELP, formatter_class=fmt)
        _global_options(cmd, suppress=True)
        return cmd

    refresh = command("refresh", "start a rolling refresh (or show its plan with --dry-run)")
    refresh.add_argument("--dry-run", action="store_true")
    selection = refresh.add_mutually_exclusive_group()
    selection.add_argument("--all", action="store_true", help="replace every instance")
    selection.add_argument("--max-age", help="replace instances older than this (7d, 168h, ...)")
    refresh.add_argument("--instance-group", action="append", help="instance group or ASG name (repeatable)")
    refresh.add_argument("--max-surge", type=int)
    refresh.add_argument("--drain-timeout", help="per-node drain timeout (10m, 600, ...)")
    refresh.add_argument("--drain-timeout-policy", choices=("pause", "terminate"))
    refresh.add_argument("--wait", type=float, default=0.0, help="seconds to follow the run until it ends")
    status = command(
        "status",
        "runs, lock holder, a table per pool (groups by AZ: sizes, markets, compensation, run progress), membership",
    )
    status.add_argument("--limit", type=int, default=5)
    status.add_argument("--run", dest="run_id", metavar="ID", help="this run (its steps and whole RUN# record)")
    status.add_argument(
        "--chart",
        type=Path,
        metavar="FILE",
        help="draw the run (--run, else the newest) into FILE (.svg, .png, .pdf): a timeline per instance and Ready "
        "nodes per group; needs the charts extra (pip install 'aws-node-manager[charts]')",
    )
    cancel = command("cancel", "cancel the active run (in-flight steps finish or are undone)")
    cancel.add_argument("--run-id")
    command("plan", "what each Lambda would do now: their own gather/decide/plan, dry run, in this process")
    conf = command("configure-agent", "write the agent's kustomize settings from a deployed stack's outputs")
    conf.add_argument("--stack-name", help="CloudFormation stack (default NodeManager-<cluster, dots as dashes>)")
    conf.add_argument(
        "--env-file",
        type=Path,
        help="the agent.env to update (default: agent/deploy/default/agent.env of this CLI's checkout)",
    )
    migrate = command(
        "migrate-table",
        "move the agent's items (NODE#, MEMBERSHIP, CMD#, HOOK#, CPDRAIN#) from the old layout to the agent "
        "partition (once, on upgrade; idempotent)",
    )
    migrate.add_argument("--table-name", help="the state table (default TABLE_NAME; stack output StateTableName)")
    local = command("local", "the local world (moto, kube-apiserver, simulated kOps cluster)")
    local_sub = local.add_subparsers(dest="local_command", required=True, metavar="ACTION")
    local_up = local_sub.add_parser("up", help="start it, print its environment, run until Ctrl-C")
    _global_options(local_up, suppress=True)
    local_up.add_argument("--nodes-per-az", type=_at_least_one, default=2, help="workers per AZ (3 AZs, 1 master each)")
    local_up.add_argument("--no-agent", action="store_true", help="do not run the agent")
    return p
