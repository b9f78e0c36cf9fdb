"""How a run and its steps are shown: in the plan, the responses, ``status`` and the CLI."""

from __future__ import annotations

from typing import Any

from core.runs import Run, RunStep


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


def run_summary(run: Run, steps: bool = False) -> dict[str, Any]:
    """A run as the responses and the CLI show it."""
    counts: dict[str, int] = {}
    for step in run.steps:
        counts[step.state.value] = counts.get(step.state.value, 0) + 1
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
        "surge_instance_ids": run.surge_instance_ids,
        "cancel_requested": run.cancel_requested,
    }
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
