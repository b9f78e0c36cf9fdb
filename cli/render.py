"""The refresher's responses (``lambdas/refresher/handler.py``'s module docstring) as text for an operator."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from cli.status import pool_tables


def render(response: Mapping[str, Any], now: datetime | None = None) -> str:
    """A response as text: status and reasons, the plan's steps, the runs (the newest with its steps), the lock, the
    cluster's groups as one table per pool (``cli.status``; ``now``, default the clock, dates backoffs), the
    compensation ledger and the node membership, each when present."""
    lines = [f"status: {response.get('status')}"]
    for key in ("reason", "error", "refusal"):
        if response.get(key):
            lines.append(f"{key}: {response[key]}")
    for error in response.get("errors") or []:
        if error not in str(response.get("error") or ""):  # the error line joins them: each is printed once
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
        lines += ["", run_line(run)]
    for i, item in enumerate(response.get("runs") or []):
        lines.append(run_line(item))
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
    lines += pool_tables(response, now or datetime.now(UTC))
    if "ledger" in response and response.get("cluster_groups"):  # the tables say what the ledgers mean for each group
        lines += ["", f"ledger (COMP#): {len(response['ledger'])} item(s) (--output json shows them)"]
    elif "ledger" in response:
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
            f"{' ending (not counted as capacity)' if m.get('ending') else ''}"
            for m in response["membership"]
        ]
    return "\n".join(lines)


def run_line(run: Mapping[str, Any]) -> str:
    """One line for a run (``RUN#`` summary): id, status, step counts by state, reason, what it waits for."""
    steps = ", ".join(f"{k} {v}" for k, v in sorted((run.get("steps") or {}).items()))
    waiting = f"; waiting for {run['waiting']}" if run.get("waiting") else ""
    reason = f"; {run['reason']}" if run.get("reason") else ""
    return f"run {run['run_id']}: {run['status']} ({steps}){reason}{waiting}"


def action_line(action: Any) -> str:
    """One action of a Lambda's response (``lambdas.common.execute``: ``{"action": <description>, "result": ...}``)."""
    if not isinstance(action, Mapping):
        return str(action)
    result = f": {action['result']}" if action.get("result") else ""
    return f"{action.get('action', '?')}{result}"
