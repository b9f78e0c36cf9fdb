"""A refresh run's chart from its ``RUN#`` record (``core.runs.Run``; written by ``lambdas/refresher``). Pure.

Rows: each step's old instance (``surge`` while its spare launches, ``drain``, ``terminate``, ``settle`` for a
master, ``undo`` when the surge is given back), and each step's spare (``launch`` until the refresher saw it Ready,
then ``ready``). The times are the record's: ``RunStep.entered`` (when the step entered each state),
``spare_ready_at``, ``settle_first_ok_at``, ``started_at``, ``finished_at``. A record written before ``entered``
existed gives one bar per step, from ``started_at`` to ``finished_at``, coloured by the phase it started in, an
empty row for its spare and flat capacity lines (what happened in between is not in it).

Ready capacity per group is what the steps imply, not a count the record holds: the group's desired capacity when
the run started (``original_desired``: the run starts a group only with that many Ready besides the instance it
replaces), + 1 when a step's spare was seen Ready (a master's replacement: when the masters were first all Ready
after it), - 1 when an old instance's (or a given-back spare's) termination was asked.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from charts.model import Chart, InstanceRow, Marker, Phase, PoolSeries, sequence, steps
from core.runs import Run, RunStep, StepState

At = Callable[[datetime | None], float | None]  # a record's time -> seconds since the run's start

PHASE_OF_STATE: dict[StepState, Phase | None] = {
    StepState.SURGING: Phase.SURGE,
    StepState.DRAINING: Phase.DRAIN,
    StepState.TERMINATING: Phase.TERMINATE,
    StepState.SETTLING: Phase.SETTLE,
    StepState.UNDOING: Phase.UNDO,
    StepState.UNDO_DRAINING: Phase.UNDO,
    StepState.UNDO_TERMINATING: Phase.UNDO,
    StepState.DONE: None,
    StepState.UNDONE: None,
    StepState.KEPT: None,
    StepState.SKIPPED: None,
    StepState.FAILED: None,
}


def short_group(name: str, cluster: str) -> str:
    """``nodes-us-east-1a.demo.k8s.local`` -> ``nodes-us-east-1a`` (kOps names groups ``<ig>.<cluster>``)."""
    return name.removesuffix(f".{cluster}")


def run_chart(run: Run) -> Chart:
    """The chart of ``run`` (rows and series as the module docstring says)."""
    origin = run.created_at
    end = _seconds(run.finished_at or run.updated_at, origin) or 0.0

    def at(when: datetime | None) -> float | None:
        return _seconds(when, origin)

    rows: list[InstanceRow] = []
    changes: dict[str, list[tuple[float | None, int]]] = {g.name: [] for g in run.groups}
    for step in sorted(run.steps, key=lambda s: s.index):
        group = short_group(step.group, run.cluster)
        rows.append(_old_row(step, group, at, end))
        delta = changes.setdefault(step.group, [])
        delta.append((at(step.entered.get(StepState.TERMINATING.value)), -1))
        if step.role != "node":
            delta.append((at(step.settle_first_ok_at), +1))
        spare_ready = at(step.spare_ready_at or step.entered.get(StepState.DRAINING.value))
        if step.surge_instance_id:
            rows.append(_spare_row(step, group, at, spare_ready, end))
            delta.append((spare_ready, +1))
            delta.append((at(step.entered.get(StepState.UNDO_TERMINATING.value)), -1))
    start = {g.name: g.original_desired for g in run.groups}
    pools = [
        PoolSeries(short_group(name, run.cluster), steps(start.get(name, 0), delta)) for name, delta in changes.items()
    ]
    return Chart(
        title=f"refresh run {run.run_id}: {run.status.value}"
        + (f" ({run.reason})" if run.reason else "")
        + f", {len(run.steps)} steps",
        rows=rows,
        pools=pools,
        end=end,
        origin=origin,
        note="Ready nodes per group as the run's steps imply them: desired capacity at the start, + each spare seen "
        "Ready, - each termination asked (RUN# record)",
    )


def _seconds(when: datetime | None, origin: datetime) -> float | None:
    return None if when is None else (when - origin).total_seconds()


def _old_row(step: RunStep, group: str, at: At, end: float) -> InstanceRow:
    events: list[tuple[float | None, Phase | None]] = []
    if step.entered:
        events += [(at(when), PHASE_OF_STATE.get(StepState(state))) for state, when in step.entered.items()]
    elif step.started_at is not None:  # a record from before ``entered``: one bar
        first = Phase.SURGE if step.role == "node" else Phase.DRAIN
        events.append((at(step.started_at), PHASE_OF_STATE.get(step.state, first) if step.state.in_flight else first))
    if step.finished_at is not None:
        events.append((at(step.finished_at), None))
    markers = []
    drained = at(step.entered.get(StepState.TERMINATING.value) or step.entered.get(StepState.UNDOING.value))
    if drained is not None and step.drain_status:  # when the refresher read the drain's outcome
        markers.append(Marker(f"drain {step.drain_status}", drained))
    finished = at(step.finished_at)
    if finished is not None and step.started_at is not None:  # (a skipped step never started: no row marker)
        markers.append(Marker(step.state.value, finished))
    return InstanceRow(
        step.instance_id, f"{step.instance_id} {group} step {step.index}", sequence(events, end), markers
    )


def _spare_row(step: RunStep, group: str, at: At, ready: float | None, end: float) -> InstanceRow:
    assert step.surge_instance_id is not None
    label = f"{step.surge_instance_id} {group} spare of step {step.index}"
    if ready is None:  # a record from before ``entered``: when the spare launched and was Ready is not known
        return InstanceRow(step.surge_instance_id, label)
    events: list[tuple[float | None, Phase | None]] = [
        (at(step.started_at), Phase.LAUNCH),
        (ready, Phase.READY),
        (at(step.entered.get(StepState.UNDO_DRAINING.value)), Phase.DRAIN),
        (at(step.entered.get(StepState.UNDO_TERMINATING.value)), Phase.TERMINATE),
    ]
    if step.state is StepState.UNDONE:
        events.append((at(step.finished_at), None))
    return InstanceRow(step.surge_instance_id, label, sequence(events, end), [Marker("Ready", ready)])
