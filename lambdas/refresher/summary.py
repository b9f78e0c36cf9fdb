"""How a run and its steps, and the cluster's groups, are shown: in the plan, the responses, ``status`` and the CLI."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from itertools import compress
from operator import attrgetter
from typing import Any

from core.kops import managed_group
from core.runs import Run, RunStep, StepState


def step_row(step: RunStep) -> dict[str, Any]:
    """A planned step as the plan and the run summary show it: which instance of which group, and whether it is due."""
    return {
        "index": step.index,
        "group": step.group,
        "role": step.role,
        "instance_id": step.instance_id,
        "node_name": step.node_name,
        "needs_update": step.needs_update,
    }


_STATE = attrgetter("state")
_IN_FLIGHT = frozenset(s for s in StepState if s.in_flight)


def run_summary(run: Run, steps: bool = False, states: list[StepState] | None = None) -> dict[str, Any]:
    """A run as the responses and the CLI show it. ``states``: ``[s.state for s in run.steps]``, when the caller has
    them (``advance_run``: its pass's)."""
    states = list(map(_STATE, run.steps)) if states is None else states
    # in the order each state first occurs: counted by the member, each named once (not a ``.value`` a step)
    counts = {state.value: n for state, n in Counter(states).items()}
    # ``Run.surge_instance_ids`` (the spares of the steps in flight), those steps picked by their states, in C
    moving = compress(run.steps, map(_IN_FLIGHT.__contains__, states))
    out: dict[str, Any] = {
        "run_id": run.run_id,
        "status": run.status.value,
        "reason": run.reason,
        "waiting": run.waiting,
        "trigger": run.options.trigger,
        "created_at": run.created_at.isoformat(),
        "updated_at": run.updated_at.isoformat(),
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "steps": counts,
        "surge": run.surge,
        "surge_instance_ids": sorted({s.surge_instance_id for s in moving if s.surge_instance_id}),
        "cancel_requested": run.cancel_requested,
    }
    left = left_raised(run)
    if left:  # what a failed run left raised past its ``give_back`` deadline: the operator's to lower
        out["left_raised"] = left
    if steps:
        out["step_details"] = [
            {
                **step_row(s),
                "state": s.state.value,
                "spare": s.surge_instance_id,
                "drain": s.drain_status,
                "note": s.note,
            }
            for s in run.steps
        ]
    return out


def left_raised(run: Run) -> dict[str, str]:
    """Group -> what ``run`` left raised past its ``give_back`` deadline (``GroupSurge.unreturned``: surge units not
    given back, counted in ``original_desired``; ``max_left``: a MaxSize not restored), in the groups' order. Pure."""
    out = {}
    for g in run.groups:
        parts = []
        if g.unreturned:
            units = f"{g.unreturned} surge unit" + ("s" if g.unreturned > 1 else "")
            parts.append(f"desired capacity {units} above its own {g.original_desired - g.unreturned}")
        if g.max_left is not None:
            parts.append(f"MaxSize {g.max_left} (was {g.original_max})")
        if parts:
            out[g.name] = ", ".join(parts)
    return out


ACTIVE_STATES = ("InService", "Pending", "Pending:Wait", "Pending:Proceed")  # count against desired capacity


def group_rows(
    raw_groups: Iterable[Mapping[str, Any]], cluster: str, markets: Mapping[str, str]
) -> list[dict[str, Any]]:
    """The cluster's groups as ``status`` shows them, one row per managed group, by pool, then AZ, then name. Pure.

    Args:
        raw_groups: DescribeAutoScalingGroups' ``AutoScalingGroups`` (with ``Tags`` and ``Instances``); groups not
            tagged for ``cluster`` are left out.
        markets: instance id -> DescribeInstances' ``InstanceLifecycle`` (``spot``; empty for On-Demand); an
            instance absent here is counted in neither market (EC2 did not say).

    Returns:
        ``{"name", "pool" (None without an instance group or pool tag), "role", "instance_group", "zones": [AZ, ...],
        "desired", "min", "max", "in_service",
        "pending", "other" (Terminating*, Detaching, Standby, ...), "spot", "on_demand" (of the InService and Pending),
        "instances": {instance id: lifecycle state}}`` per group.
    """
    rows = []
    for asg in raw_groups:
        group = managed_group(asg, cluster)
        if group is None:
            continue
        states = {str(i["InstanceId"]): str(i.get("LifecycleState", "")) for i in asg.get("Instances", [])}
        active = [iid for iid, state in states.items() if state in ACTIVE_STATES]
        rows.append(
            {
                "name": group.name,
                "pool": group.pool,
                "role": group.role.value,
                "instance_group": group.instance_group,
                "zones": sorted(group.availability_zones),
                "desired": int(asg.get("DesiredCapacity", 0)),
                "min": int(asg.get("MinSize", 0)),
                "max": int(asg.get("MaxSize", 0)),
                "in_service": sum(1 for state in states.values() if state == "InService"),
                "pending": sum(1 for state in states.values() if state.startswith("Pending")),
                "other": sum(1 for state in states.values() if state not in ACTIVE_STATES),
                "spot": sum(1 for iid in active if markets.get(iid) == "spot"),
                "on_demand": sum(1 for iid in active if iid in markets and markets[iid] == ""),
                "instances": states,
            }
        )
    return sorted(rows, key=lambda r: (r["pool"] or "", r["zones"], r["name"]))
