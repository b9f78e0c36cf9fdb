"""``node-manager status`` as tables an operator reads at a glance: one table per pool, one row per group (so per AZ
in kOps' one-group-per-AZ layout), with its sizes, its instances by state and market, the Ready nodes the agent
reports, the capacity it owes or carries for a sibling, and the active refresh run's progress on it.

Pure: the refresher's status response in (``lambdas/refresher/service.py``: ``cluster_groups``, ``ledger``, ``runs``,
``membership``), lines out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

ACTIVE_RUN = ("running", "pausing", "cancelling", "paused")
COLUMNS = (
    "AZ",
    "group",
    "desired",
    "min-max",
    "InService",
    "Pending",
    "Ready",
    "Spot",
    "On-Demand",
    "compensation",
    "refresh",
)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    """Columns padded to their widest cell, two spaces apart, trailing blanks cut."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    return [
        (indent + "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True))).rstrip()
        for line in (list(headers), *rows)
    ]


def _time(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value)) if value else None
    except ValueError:
        return None


def compensation_notes(ledger: Sequence[Mapping[str, Any]], now: datetime) -> dict[str, list[str]]:
    """Group name -> what its ``COMP#`` ledgers say, short: ``owes 2`` (``giving back`` once the give-back started),
    ``carries 1 for <failed group>`` on a donor (raised minus given back), ``backoff until HH:MM`` while a failed group
    is not trusted, ``left raised for <failed group>: ...`` on a donor a give-back left raised past its deadline (the
    operator's to lower: ``Ledger.left_raised``)."""
    notes: dict[str, list[str]] = {}
    for item in ledger:
        failed = str(item.get("asg_name") or str(item.get("sk", "")).removeprefix("COMP#"))
        for left in item.get("left_raised") or []:
            notes.setdefault(str(left.get("donor")), []).append(f"left raised for {failed}: {_left(left)}")
        backoff = item.get("backoff") or {}
        last = _time(backoff.get("last_failure_at"))
        if last is not None:
            until = last + timedelta(seconds=float(backoff.get("window_seconds") or 0))
            if until > now:
                notes.setdefault(failed, []).append(f"backoff until {until:%H:%M}")
        comp = item.get("compensation")
        if not comp:
            continue
        owed = int(comp.get("owed") or 0)
        notes.setdefault(failed, []).append(f"owes {owed}" + (", giving back" if comp.get("returning") else ""))
        for donor, d in (comp.get("donors") or {}).items():
            carried = int(d.get("raised_by") or 0) - int(d.get("returned") or 0)
            if carried > 0:
                notes.setdefault(str(donor), []).append(f"carries {carried} for {failed}")
    return notes


def _left(left: Mapping[str, Any]) -> str:
    """A ``LeftRaised`` record, short: ``1 unit(s), MaxSize 5 (was 4) since HH:MM``."""
    parts = [f"{left['units']} unit(s)"] if left.get("units") else []
    if left.get("max_size") is not None:
        parts.append(f"MaxSize {left['max_size']} (was {left.get('max_before')})")
    at = _time(left.get("at"))
    return ", ".join(parts or ["nothing"]) + (f" since {at:%Y-%m-%d %H:%M}" if at else "")


def run_progress(runs: Sequence[Mapping[str, Any]]) -> tuple[str | None, dict[str, str]]:
    """The newest run if it is active: its id, and group name -> ``"<done>/<steps> done"`` plus the state of the step
    being worked on (``", <instance> draining"``). A newest run over that left capacity raised (``left_raised``: past
    its ``give_back`` deadline, it failed): its id, and group name -> ``"left raised: <what>"``."""
    if runs and runs[0].get("status") not in ACTIVE_RUN and runs[0].get("left_raised"):
        return str(runs[0]["run_id"]), {str(g): f"left raised: {w}" for g, w in runs[0]["left_raised"].items()}
    if not runs or runs[0].get("status") not in ACTIVE_RUN:
        return None, {}
    run = runs[0]
    progress: dict[str, str] = {}
    by_group: dict[str, list[Mapping[str, Any]]] = {}
    for step in run.get("step_details") or []:
        by_group.setdefault(str(step["group"]), []).append(step)
    for group, steps in by_group.items():
        done = sum(1 for s in steps if s.get("state") == "done")
        current = next((s for s in steps if s.get("state") not in ("done", "pending")), None)
        working = f", {current['instance_id']} {current['state']}" if current else ""
        progress[group] = f"{done}/{len(steps)} done{working}"
    return str(run["run_id"]), progress


def pool_tables(response: Mapping[str, Any], now: datetime) -> list[str]:
    """The tables (see the module docstring), a blank line before each pool; the reason when the groups could not
    be read; nothing when the response has no ``cluster_groups`` (every response but status)."""
    if response.get("cluster_groups_error"):
        return ["", f"groups: not read ({response['cluster_groups_error']})"]
    groups: Sequence[Mapping[str, Any]] = response.get("cluster_groups") or []
    if not groups:
        return []
    ready: dict[str, int] = {}
    for member in response.get("membership") or []:
        if member.get("ready") and member.get("asg"):
            ready[member["asg"]] = ready.get(member["asg"], 0) + 1
    notes = compensation_notes(response.get("ledger") or [], now)
    run_id, progress = run_progress(response.get("runs") or [])
    pools: dict[str, list[Mapping[str, Any]]] = {}
    for group in groups:
        pools.setdefault(str(group.get("pool") or group["name"]), []).append(group)
    lines: list[str] = []
    for pool, members in pools.items():
        role = "control plane" if members[0].get("role") == "control-plane" else "workers"
        lines += ["", f"pool {pool} ({role})"]
        rows = [
            [
                ",".join(g.get("zones") or []) or "-",
                str(g["name"]),
                str(g["desired"]),
                f"{g['min']}-{g['max']}",
                str(g["in_service"]),
                str(g["pending"]),
                str(ready.get(str(g["name"]), 0)),
                str(g["spot"]),
                str(g["on_demand"]),
                "; ".join(notes.get(str(g["name"]), [])) or "-",
                progress.get(str(g["name"]), "-"),
            ]
            for g in members
        ]
        lines += table(COLUMNS, rows)
    if run_id is not None and (response.get("runs") or [{}])[0].get("status") in ACTIVE_RUN:
        lines.append(f"(refresh: progress of run {run_id})")
    elif run_id is not None:
        lines.append(f"(refresh: what run {run_id} left raised, the operator's to lower)")
    return lines
