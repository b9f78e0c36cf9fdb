"""Operator CLI for the refresher: ``python -m cli [--function-name NAME | --local] COMMAND``.

Commands::

    refresh [--dry-run] [--all | --max-age 7d] [--instance-group NAME ...] [--max-surge N]
            [--drain-timeout 10m] [--drain-timeout-policy pause|terminate] [--wait SECONDS]
    status  [--limit N]
    cancel  [--run-id ID]

Where the work happens:

- ``--function-name NAME``: invoke the deployed Lambda (``lambda:InvokeFunction``, RequestResponse) through boto3
  with the same payload ``aws lambda invoke`` would send; the default credential chain and region.
- ``--local``: run the same handler in this process against whatever ``AWS_ENDPOINT_URL`` names (the local world's
  moto server) or AWS itself, with the Lambda's settings from the environment (``CLUSTER_NAME``, ``TABLE_NAME``,
  ``QUEUE_URL``, ``REFRESH_*``). Without an event pump nothing but this process advances a run: ``--wait`` keeps
  invoking the tick until the run ends.

``--cluster`` defaults to ``CLUSTER_NAME``. ``--json`` prints the raw response. Exit codes: 0 done, 1 the function
refused or rejected the request, 2 bad usage or configuration.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import io
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

Invoke = Callable[[dict[str, Any]], dict[str, Any]]


def client_context(caller: str | None) -> str | None:
    """The ``ClientContext`` of an Invoke call naming ``caller`` (base64 JSON ``{"custom": {"caller": ...}}``, which
    the function reads as ``context.client_context.custom`` and logs); None without a caller. Self-reported:
    CloudTrail's Lambda data events record the authenticated caller."""
    if not caller:
        return None
    return base64.b64encode(json.dumps({"custom": {"caller": caller}}).encode()).decode()


def lambda_invoker(function_name: str, client: Any, caller: str | None = None) -> Invoke:
    """Invoke the deployed function synchronously; returns its JSON response. ``caller`` (this CLI's identity,
    ``sts get-caller-identity``) travels in the call's ``ClientContext`` so the function's log names it.

    Raises:
        RuntimeError: the function failed (``FunctionError``), with its error message.
    """
    context = client_context(caller)

    def invoke(payload: dict[str, Any]) -> dict[str, Any]:
        extra = {"ClientContext": context} if context else {}
        out = client.invoke(
            FunctionName=function_name,
            InvocationType="RequestResponse",
            Payload=json.dumps(payload).encode(),
            **extra,
        )
        body = json.loads(out["Payload"].read() or b"null")
        if out.get("FunctionError"):
            raise RuntimeError(f"{function_name} failed: {body}")
        return body if isinstance(body, dict) else {"status": "unknown", "body": body}

    return invoke


def caller_arn(boto3: Any) -> str | None:
    """This CLI's identity (STS GetCallerIdentity ``Arn``), or None when STS cannot say (the invoke still goes)."""
    try:
        return str(boto3.client("sts").get_caller_identity()["Arn"])
    except Exception:  # noqa: BLE001 - naming the caller is best effort; the invocation does not depend on it
        return None


def local_invoker(environ: Mapping[str, str]) -> Invoke:
    """Run the refresher's handler in this process, with settings from ``environ``.

    Raises:
        SettingsError: a setting is missing or invalid.
    """
    import boto3
    from aws_lambda_powertools import Metrics

    from core.settings import RefresherSettings
    from lambdas.refresher.handler import Deps, handle
    from localworld.lambda_context import REFRESHER_FUNCTION, LocalLambdaContext

    settings = RefresherSettings.from_env(environ)
    namespace = environ.get("POWERTOOLS_METRICS_NAMESPACE", "NodeManager")
    deps = Deps.from_session(
        settings, boto3.session.Session(), metrics=Metrics(namespace=namespace, service="refresher")
    )
    return lambda payload: handle(payload, deps, LocalLambdaContext(900, REFRESHER_FUNCTION))


def quiet(invoke: Invoke) -> Invoke:
    """In-process invocations print the handler's JSON log lines on stdout (as Lambda does): keep them off the
    operator's output."""

    def run(payload: dict[str, Any]) -> dict[str, Any]:
        with contextlib.redirect_stdout(io.StringIO()):
            return invoke(payload)

    return run


def payload_of(args: argparse.Namespace) -> dict[str, Any]:
    """The request payload for the command (the shapes of ``lambdas/events/request.py``)."""
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
    elif args.command == "cancel" and args.run_id:
        base["run_id"] = args.run_id
    return base


def render(response: Mapping[str, Any]) -> str:
    """A response as text for an operator."""
    lines = [f"status: {response.get('status')}"]
    for key in ("reason", "error", "refusal"):
        if response.get(key):
            lines.append(f"{key}: {response[key]}")
    for error in response.get("errors") or []:
        lines.append(f"  - {error}")
    if response.get("table"):
        lines += ["", str(response["table"])]
    if response.get("steps") and isinstance(response["steps"], list):
        lines += ["", "  step  group  instance  node  (needs update because)"]
        lines += [
            f"  {s['index']:>3}  {s['group']}  {s['instance_id']}  {s.get('node_name') or '-'}  ({s['needs_update']})"
            for s in response["steps"]
        ]
    run = response.get("run")
    if run:
        lines += ["", _run_line(run)]
    for i, item in enumerate(response.get("runs") or []):
        lines.append(_run_line(item))
        if i == 0:
            for s in item.get("step_details", []):
                lines.append(
                    f"    {s['index']:>3} {s['state']:<16} {s['group']}  {s['instance_id']}  "
                    f"spare={s.get('spare') or '-'}  drain={s.get('drain') or '-'}  {s.get('note') or ''}"
                )
    if "lock" in response:
        lock = response.get("lock") or {}
        lines.append(
            f"lock: {lock.get('holder') or 'free'}"
            + (f" ({lock.get('operation')}, fencing {lock.get('fencing')})" if lock.get("holder") else "")
        )
    if "ledger" in response:
        lines.append(f"ledger (COMP#): {len(response['ledger'])} item(s)")
        lines += [
            f"  {item.get('sk')}: {json.dumps({k: v for k, v in item.items() if k not in ('pk', 'sk')})}"
            for item in response["ledger"]
        ]
    if "membership" in response:
        lines.append(f"membership: {len(response['membership'])} node(s)")
        lines += [
            f"  {m['node_name']:<40} {m['instance_id']}  {m.get('asg') or '-'}  "
            f"{'Ready' if m['ready'] else 'NotReady'}{' cordoned' if m.get('unschedulable') else ''}"
            for m in response["membership"]
        ]
    return "\n".join(lines)


def _run_line(run: Mapping[str, Any]) -> str:
    steps = ", ".join(f"{k} {v}" for k, v in sorted((run.get("steps") or {}).items()))
    waiting = f"; waiting for {run['waiting']}" if run.get("waiting") else ""
    reason = f"; {run['reason']}" if run.get("reason") else ""
    return f"run {run['run_id']}: {run['status']} ({steps}){reason}{waiting}"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m cli", description="Operate the node-manager refresher.")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--function-name", help="the deployed refresher Lambda (name or ARN)")
    where.add_argument("--local", action="store_true", help="run the handler in this process (AWS_ENDPOINT_URL)")
    p.add_argument("--cluster", default=os.environ.get("CLUSTER_NAME"), help="kOps cluster (default CLUSTER_NAME)")
    p.add_argument("--json", action="store_true", help="print the raw JSON response")
    sub = p.add_subparsers(dest="command", required=True)
    refresh = sub.add_parser("refresh", help="start a rolling refresh (or show its plan with --dry-run)")
    refresh.add_argument("--dry-run", action="store_true")
    selection = refresh.add_mutually_exclusive_group()
    selection.add_argument("--all", action="store_true", help="replace every instance")
    selection.add_argument("--max-age", help="replace instances older than this (7d, 168h, ...)")
    refresh.add_argument("--instance-group", action="append", help="instance group or ASG name (repeatable)")
    refresh.add_argument("--max-surge", type=int)
    refresh.add_argument("--drain-timeout", help="per-node drain timeout (10m, 600, ...)")
    refresh.add_argument("--drain-timeout-policy", choices=("pause", "terminate"))
    refresh.add_argument("--wait", type=float, default=0.0, help="seconds to follow the run until it ends")
    status = sub.add_parser("status", help="runs, compensation ledger, lock holder, membership")
    status.add_argument("--limit", type=int, default=5)
    cancel = sub.add_parser("cancel", help="cancel the active run (in-flight steps finish or are undone)")
    cancel.add_argument("--run-id")
    return p


def follow(
    invoke: Invoke, cluster: str, run_id: str, seconds: float, local: bool, out: Callable[[str], None]
) -> dict[str, Any]:
    """Until the run ends or ``seconds`` pass: in local mode invoke the tick (nothing else advances the run),
    then read the status. Returns the last status response."""
    deadline = time.monotonic() + seconds
    last: dict[str, Any] = {}
    seen = ""
    while time.monotonic() < deadline:
        if local:
            invoke({"trigger": "tick"})
        last = invoke({"action": "status", "cluster": cluster, "limit": 1})
        run = next((r for r in last.get("runs", []) if r["run_id"] == run_id), None)
        if run is not None:
            line = _run_line(run)
            if line != seen:
                out(line)
                seen = line
            if run["status"] not in ("running", "pausing", "cancelling"):
                break
        time.sleep(1.0)
    return last


def main(
    argv: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
    invoker: Invoke | None = None,
    out: Callable[[str], None] = print,
) -> int:
    """Entry point; returns the exit code. ``invoker`` replaces the chosen mode (tests)."""
    args = parser().parse_args(argv)
    env = os.environ if environ is None else environ
    if not args.cluster:
        out("--cluster or CLUSTER_NAME is required")
        return 2
    try:
        if invoker is None:
            if args.local:
                invoker = local_invoker(env)
            else:
                import boto3

                invoker = lambda_invoker(args.function_name, boto3.client("lambda"), caller_arn(boto3))
    except Exception as err:  # noqa: BLE001 - configuration problems end the CLI with a message
        out(f"cannot start: {err}")
        return 2
    if args.local:
        invoker = quiet(invoker)
    payload = payload_of(args)
    try:
        response = invoker(payload)
    except Exception as err:  # noqa: BLE001 - any failure of the invocation is reported to the operator as exit 1
        out(f"invocation failed: {err}")
        return 1
    out(json.dumps(response, indent=2, default=str) if args.json else render(response))
    if args.command == "refresh" and args.wait and response.get("run"):
        follow(invoker, args.cluster, response["run"]["run_id"], args.wait, args.local, out)
    # A dry run that a real run would refuse (e.g. an unknown instance group) fails the same way.
    return 1 if response.get("status") in ("rejected", "refused") or response.get("refusal") else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
