"""The operator CLI: ``node-manager COMMAND [options]`` (installed by ``pip install .``) or ``python -m cli``.

Commands::

    refresh [--dry-run] [--all | --max-age 7d] [--instance-group NAME ...] [--max-surge N]
            [--drain-timeout 10m] [--drain-timeout-policy pause|terminate] [--wait SECONDS]
    status  [--limit N] [--run ID] [--chart FILE]   --chart: the run's timeline as a picture (.svg/.png/.pdf)
    cancel  [--run-id ID]
    plan                       what each Lambda would do now (their own code, dry run, in this process)
    configure-agent [--stack-name NAME] [--env-file PATH]
    migrate-table [--table-name NAME]   move the agent's items to their own partition (once, on upgrade)
    local up [--nodes-per-az N] [--no-agent]

Where refresh/status/cancel happen:

- ``--function-name NAME`` (default ``REFRESHER_FUNCTION_NAME``): invoke the deployed refresher Lambda
  (``lambda:InvokeFunction``, RequestResponse) with the payload ``aws lambda invoke`` would send.
- ``--local``: run the same handler in this process against whatever ``AWS_ENDPOINT_URL`` names (the local world's
  moto server, see ``local up``) or AWS itself, with the Lambda's settings from the environment. Nothing but this
  process advances a run then: ``refresh --wait`` invokes the tick until the run ends.

Global options (``--cluster``, ``--function-name``, ``--local``, ``--output``) go before or after the command.
Output on stdout, errors on stderr (one line). Exit codes: 0 done, 1 refused, rejected or failed, 2 bad usage or
configuration, 130 interrupted (Ctrl-C), 143 terminated (SIGTERM; ``local up``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from cli.args import parser
from cli.invoke import Invoke, caller_arn, lambda_invoker, local_invoker, quiet
from cli.render import action_line, render, run_line

# re-exported: tests and scripts import these from cli.main
__all__ = ["Invoke", "lambda_invoker", "local_invoker", "main", "parser", "render", "run"]

# configure-agent's default --env-file, relative to a checkout (a directory with pyproject.toml and this file).
ENV_FILE_IN_CHECKOUT = Path("agent") / "deploy" / "default" / "agent.env"
# The checkout this CLI's code lives in, if it runs from one (after `pip install .` it is site-packages: no checkout).
CODE_ROOT = Path(__file__).resolve().parent.parent


def checkout_env_file(cwd: Path) -> Path | None:
    """configure-agent's default env file: that of the checkout ``cwd`` is in (the operator's), else that of the
    checkout this code runs from; None when neither is a checkout (an installed CLI run outside one)."""
    for start in (cwd.resolve(), CODE_ROOT):
        for root in (start, *start.parents):
            if (root / "pyproject.toml").is_file() and (root / ENV_FILE_IN_CHECKOUT).is_file():
                return root / ENV_FILE_IN_CHECKOUT
    return None


class UsageError(Exception):
    """Bad usage or configuration (exit 2)."""


def payload_of(args: argparse.Namespace) -> dict[str, Any]:
    """The request payload for refresh/status/cancel (the shapes of ``lambdas/events/request.py``)."""
    base: dict[str, Any] = {"action": args.command, "cluster": args.cluster}
    if args.command == "refresh":
        base["dry_run"] = args.dry_run
        if args.all:
            base["all"] = True
        if args.max_age:
            base["max_age"] = args.max_age
        if args.instance_group:
            base["instance_groups"] = args.instance_group
        for key in ("max_surge", "drain_timeout", "drain_timeout_policy"):
            if getattr(args, key) is not None:
                base[key] = getattr(args, key)
    elif args.command == "status":
        base["limit"] = args.limit
        if args.run_id:
            base["run_id"] = args.run_id
    elif args.command == "cancel" and args.run_id:
        base["run_id"] = args.run_id
    return base


def follow(
    invoke: Invoke,
    cluster: str,
    run_id: str,
    seconds: float,
    local: bool,
    out: Callable[[str], None],
    seen: str = "",
    progress: Callable[[str], None] | None = None,
    quiet_seconds: float = 15.0,
) -> dict[str, Any]:
    """Until the run ends or ``seconds`` pass: in local mode invoke the tick (nothing else advances the run), then
    read the status; print the run's line each time it changes (``seen``: the line already printed), and to
    ``progress`` a "still waiting" line after each ``quiet_seconds`` without a change. Returns the last status
    response."""
    started = time.monotonic()
    deadline = started + seconds
    last: dict[str, Any] = {}
    changed = started
    while time.monotonic() < deadline:
        if local:
            invoke({"trigger": "tick"})
        last = invoke({"action": "status", "cluster": cluster, "limit": 1})
        run = next((r for r in last.get("runs", []) if r["run_id"] == run_id), None)
        if run is not None:
            line = run_line(run)
            if line != seen:
                out(line)
                seen, changed = line, time.monotonic()
            elif progress is not None and time.monotonic() - changed >= quiet_seconds:
                progress(f"... run {run_id} still {run['status']} after {time.monotonic() - started:.0f} s")
                changed = time.monotonic()
            if run["status"] not in ("running", "pausing", "cancelling"):
                break
        time.sleep(1.0)
    return last


def _refresher(args: argparse.Namespace, env: Mapping[str, str], invoker: Invoke | None) -> Invoke:
    if invoker is not None:
        return quiet(invoker) if args.local else invoker
    if args.local:
        return quiet(local_invoker({**env, "CLUSTER_NAME": args.cluster}))
    if not args.function_name:
        raise UsageError("say where the refresher runs: --function-name NAME (or REFRESHER_FUNCTION_NAME) or --local")
    import boto3

    return lambda_invoker(args.function_name, boto3.client("lambda"), caller_arn(boto3))


def _operate(
    args: argparse.Namespace,
    env: Mapping[str, str],
    invoker: Invoke | None,
    out: Callable[[str], None],
    err: Callable[[str], None],
) -> int:
    chart: Path | None = getattr(args, "chart", None)
    if chart is not None:  # before anything is asked: a missing library or a bad name is a usage error (exit 2)
        from charts.render import check_path, require

        require()
        try:
            check_path(chart)
        except ValueError as error:
            raise UsageError(str(error)) from error
    invoke = _refresher(args, env, invoker)
    response = invoke(payload_of(args))
    text = render(response)
    if args.output == "json":
        out(json.dumps(response, indent=2, default=str))
    else:
        out(text)
    run = response.get("run")
    if args.command == "refresh" and run and not args.dry_run:
        if args.wait:
            shown = run_line(run) if args.output == "text" else ""  # render() printed it already
            follow(invoke, args.cluster, run["run_id"], args.wait, args.local, out, seen=shown, progress=err)
        elif args.output == "text":
            how = (
                "each `node-manager --local refresh --wait N` or tick advances it"
                if args.local
                else "the refresher's events and tick advance it"
            )
            out(f"started run {run['run_id']} ({how}); follow it with `node-manager status`")
    if chart is not None and response.get("status") == "ok":
        return _chart(invoke, args.cluster, response, chart, out if args.output == "text" else None, err)
    # A dry run that a real run would refuse (e.g. an unknown instance group) fails the same way.
    return 1 if response.get("status") in ("rejected", "refused") or response.get("refusal") else 0


def _chart(
    invoke: Invoke,
    cluster: str,
    response: Mapping[str, Any],
    path: Path,
    out: Callable[[str], None] | None,
    err: Callable[[str], None],
) -> int:
    """Draw the run of a status response into ``path``: its ``run_record``, else the newest run's (asked for);
    ``out`` (None with ``--output json``: stdout stays one JSON document) gets a line naming the file."""
    from charts.render import write
    from charts.runrecord import run_chart
    from core.runs import Run

    record = response.get("run_record")
    if record is None:
        runs = response.get("runs") or []
        if not runs:
            err("node-manager: no run to draw (status shows none)")
            return 1
        record = invoke({"action": "status", "cluster": cluster, "limit": 1, "run_id": runs[0]["run_id"]}).get(
            "run_record"
        )
    if record is None:
        err("node-manager: the refresher's status response has no run_record (an older refresher deployed?)")
        return 1
    chart = run_chart(Run.model_validate(record))
    write(chart, path)
    if out is not None:
        out(f"chart: {path} ({len(chart.rows)} instance rows, {len(chart.pools)} groups)")
    return 0


def _plan(args: argparse.Namespace, env: Mapping[str, str], out: Callable[[str], None]) -> int:
    import boto3

    from cli.plan import plan_all

    plans = plan_all(env, boto3.session.Session(), args.cluster)
    if args.output == "json":
        out(json.dumps(plans, indent=2, default=str))
    else:
        for name, answer in plans.items():
            out(f"{name}: {answer.get('status')}" + (f" ({answer['reason']})" if answer.get("reason") else ""))
            if answer.get("error") or answer.get("refusal"):
                out(f"  {answer.get('error') or answer.get('refusal')}")
            for step in answer.get("steps") or []:
                out(
                    f"  step {step['index']}: replace {step['instance_id']} of {step['group']} ({step['needs_update']})"
                )
            for action in answer.get("actions") or []:
                out(f"  {action_line(action)}")
    return 0


def _configure_agent(args: argparse.Namespace, out: Callable[[str], None], err: Callable[[str], None]) -> int:
    import boto3

    from cli.agentconf import StackOutputsError, stack_name_of, stack_settings, update_env_file

    path: Path | None = args.env_file
    if path is None:
        path = checkout_env_file(Path.cwd())
        if path is None:
            raise UsageError("no checkout here to find agent/deploy/default/agent.env: give --env-file PATH")
    try:
        stack = args.stack_name or stack_name_of(args.cluster)
        settings = stack_settings(boto3.client("cloudformation"), stack, args.cluster)
    except StackOutputsError as error:
        err(str(error))
        return 1
    changed = update_env_file(path, settings)
    if args.output == "json":
        out(json.dumps({"env_file": str(path), "settings": settings, "changed": changed}, indent=2))
    else:
        what = ", ".join(changed) if changed else "nothing"
        out(f"{path}: {what} changed; apply with `kubectl apply -k {path.parent}`")
    return 0


def _migrate_table(args: argparse.Namespace, env: Mapping[str, str], out: Callable[[str], None]) -> int:
    import boto3

    from adapters.dynamo.migrate import move_agent_items

    name = args.table_name or env.get("TABLE_NAME")
    if not name:
        raise UsageError("--table-name or TABLE_NAME is required")
    counts = move_agent_items(boto3.resource("dynamodb").Table(name), args.cluster)
    if args.output == "json":
        out(json.dumps({kind: dict(counter) for kind, counter in counts.items()}, indent=2))
    else:
        for what, counter in counts.items():
            out(f"{what}: {sum(counter.values())}" + "".join(f" {k}={n}" for k, n in sorted(counter.items())))
    return 0


def main(
    argv: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
    invoker: Invoke | None = None,
    out: Callable[[str], None] = print,
    err: Callable[[str], None] | None = None,
) -> int:
    """Run one command; returns the exit code. ``invoker`` replaces the refresher's invocation (tests); ``out`` gets
    each line of output, ``err`` each error line (default stderr)."""
    from charts.render import ChartsUnavailableError
    from core.exceptions import SettingsError

    err = err or (lambda line: print(line, file=sys.stderr, flush=True))
    env = os.environ if environ is None else environ
    try:
        args = parser().parse_args(argv)
    except SystemExit as exit_:  # argparse: --help (0) or a usage error already printed on stderr (2)
        return int(exit_.code or 0)
    args.cluster = args.cluster or env.get("CLUSTER_NAME")
    args.function_name = args.function_name or env.get("REFRESHER_FUNCTION_NAME")
    try:
        if args.command == "local":
            from cli.local import up

            return up(args.cluster or "demo.k8s.local", args.nodes_per_az, not args.no_agent, out, err)
        if not args.cluster:
            raise UsageError("--cluster or CLUSTER_NAME is required")
        if args.command == "plan":
            return _plan(args, env, out)
        if args.command == "configure-agent":
            return _configure_agent(args, out, err)
        if args.command == "migrate-table":
            return _migrate_table(args, env, out)
        return _operate(args, env, invoker, out, err)
    except (UsageError, SettingsError, ChartsUnavailableError) as error:
        err(f"node-manager: {error}")
        return 2
    except KeyboardInterrupt:
        err("node-manager: interrupted")
        return 130
    except Exception as error:  # noqa: BLE001 - any failure of the command is one line on stderr and exit 1
        err(f"node-manager {args.command} failed: {type(error).__name__}: {error}")
        return 1


def default_region_from_aws_region() -> None:
    """Let ``AWS_REGION`` name the region, as ``--help`` says: boto3 reads only ``AWS_DEFAULT_REGION`` (botocore
    ``configprovider``, ``region``), so it is copied there when that is unset (this process's environment only)."""
    if os.environ.get("AWS_REGION") and not os.environ.get("AWS_DEFAULT_REGION"):
        os.environ["AWS_DEFAULT_REGION"] = os.environ["AWS_REGION"]


def run() -> None:
    """The ``node-manager`` console script (``[project.scripts]``)."""
    default_region_from_aws_region()
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    run()
