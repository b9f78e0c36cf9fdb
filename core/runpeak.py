"""The largest ``RUN#`` item a run reaches while it runs: a projection of the run at its peak. Pure.

A run's item grows as it goes: a pending step is a short row (``core.runrecord``), a finished one a longer row (its
state, spare, drain, note, times and command), and a step in flight a whole map with the fields only a step in flight
carries, its ``surge_baseline`` first (the ids of its group's instances when the surge was asked for). A run that fits
at its creation can therefore outgrow ``core.runlimits.RUN_ITEM_GUARD_BYTES`` halfway through, and then pauses
(``lambdas/common/refused.py``). ``peak_run`` builds the run as it will be at its largest, so a start can measure that
item (``RunStore.item_of``) and refuse the run before it takes the lock (``lambdas/refresher/runsize.py``).

The projection (``peak_run``), conservative where the run's own values are not known yet:

- every step finished ``done`` as the refresher leaves one (spare id of EC2's form, drain ``succeeded``, its drain
  command id, the longest note a ``done`` step gets, the times a worker or a master records, each distinct one with
  all its microseconds, a step after the run's first day);
- except, in the group where they weigh most (``in_flight_group``), the last ``k`` steps in flight at once
  (``k = min(max_surge, steps of the group)`` for workers, 1 for the control plane: workers surge up to ``max_surge``
  within one group at a time, control-plane steps go one at a time), each as a ``draining`` map: spare, drain command,
  every wait started, intent and state times, and a ``surge_baseline`` of ``original_desired + k`` instance ids; the
  group's surge (``raised = k``, MaxSize raised by ``k``) and the run's ``waiting`` line for each of them;
- a step without a node name gets one of EC2's longer private DNS form (``NODE_NAME``).

What it does not project: a ``running`` run's ``reason`` (empty while it runs), the notes a stopping run's steps get
(a stopping run's item is saved shed when it would not fit: ``adapters.dynamo.runs``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from core.kops import Role
from core.runrecord import command_id
from core.runs import GroupSurge, Run, RunStatus, RunStep, StepState, WaitDeadline

# the longest note a ``done`` step gets (lambdas/refresher/decide: master.py, replace.py's RECLAIMED_NOTE + ": spare
# kept"); the projection is conservative when a longer one appears
DONE_NOTE = "old instance left its group under the step (reclaimed): spare kept"
# a node name of EC2's regional private DNS form, 4 digit groups at their longest
NODE_NAME = "ip-172-20-255-255.ap-southeast-2.compute.internal"
DAY = timedelta(days=1)
# a step's time and each next one: whole minutes plus microseconds with every digit significant (a delta costs its
# digits in the row: ``core.runrecord``)
STEP_SPACING = timedelta(hours=1, microseconds=123_457)
STATE_SPACING = timedelta(minutes=17, microseconds=654_321)


def spare_id(index: int) -> str:
    """A spare's instance id of EC2's form (``i-`` + 17 hex digits), distinct per step."""
    return f"i-{index + 0xF0000000000000000:017x}"[:19]


def baseline_id(group: int, n: int) -> str:
    """The ``n``-th instance id of a projected ``surge_baseline`` (EC2's form)."""
    return f"i-{(group << 40) + n + 0xE0000000000000000:017x}"[:19]


def in_flight_group(run: Run) -> tuple[str | None, int]:
    """The group whose steps in flight make the largest item, and how many are in flight at once (pure).

    Returns:
        (group name, k) with k = min(max_surge, the group's steps) for a worker group, 1 for a master group; the
        group maximising ``k * (original_desired + k)`` (the baseline ids its steps carry); (None, 0) without steps.
    """
    best: tuple[int, str | None, int] = (-1, None, 0)
    for group in run.groups:
        steps = sum(1 for s in run.steps if s.group == group.name)
        if not steps:
            continue
        k = min(run.options.max_surge, steps) if group.role == Role.NODE.value else 1
        weight = k * (group.original_desired + k)
        if weight > best[0]:
            best = (weight, group.name, k)
    return best[1], best[2]


def _done(step: RunStep, run: Run) -> RunStep:
    """``step`` finished ``done`` with the times the refresher records, those of one pass equal (a worker: started
    and surging; draining and its spare Ready; terminating; done and finished. A master: started and draining;
    terminating; settling; the masters' first check; done and finished)."""
    t = [run.created_at + DAY + STEP_SPACING * (step.index + 1) + STATE_SPACING * n for n in range(5)]
    extra: dict[str, Any]
    if step.role != Role.NODE.value:  # a control-plane step (drained first, no spare)
        states = {StepState.DRAINING: t[0], StepState.TERMINATING: t[1], StepState.SETTLING: t[2]}
        extra = {"settle_first_ok_at": t[3]}
    else:
        states = {StepState.SURGING: t[0], StepState.DRAINING: t[1], StepState.TERMINATING: t[2]}
        extra = {"spare_ready_at": t[1], "surge_instance_id": spare_id(step.index)}
    return step.model_copy(
        update={
            "node_name": step.node_name or NODE_NAME,
            "state": StepState.DONE,
            "command_id": command_id(run.run_id, step.index),
            "drain_status": "succeeded",
            "started_at": t[0],
            "entered": {**{s.value: at for s, at in states.items()}, StepState.DONE.value: t[4]},
            "finished_at": t[4],
            "note": DONE_NOTE,
            **extra,
        }
    )


def _in_flight(step: RunStep, run: Run, group: GroupSurge, position: int, k: int) -> RunStep:
    start = run.created_at + DAY + STEP_SPACING * (step.index + 1)
    times = [start + STATE_SPACING * n for n in range(len(WaitDeadline) + 4)]
    return step.model_copy(
        update={
            "node_name": step.node_name or NODE_NAME,
            "state": StepState.DRAINING,
            "surge_baseline": [baseline_id(position, n) for n in range(group.original_desired + k)],
            "surge_instance_id": spare_id(step.index),
            "command_id": command_id(run.run_id, step.index),
            "drain_status": "running",
            "intent_at": times[0],
            "waiting_since": {w.value: t for w, t in zip(WaitDeadline, times[1:], strict=False)},
            "started_at": times[-3],
            "entered": {StepState.SURGING.value: times[-3], StepState.DRAINING.value: times[-1]},
            "spare_ready_at": times[-2],
        }
    )


def peak_run(run: Run) -> Run:
    """``run`` at its largest while it runs (the module docstring says how it is projected): its steps finished,
    but for those in flight at once in ``in_flight_group``; status ``running``.

    Args:
        run: a run as planned (its steps pending) or any later state of it; only its steps' plan (index, group,
            role, instance, node name, why) and its groups' sizes are read.

    Returns:
        A new ``Run``; ``run`` is not changed.
    """
    name, k = in_flight_group(run)
    flying = [s.index for s in run.steps if s.group == name][-k:] if k else []
    position = next((n for n, g in enumerate(run.groups) if g.name == name), 0)
    groups = [
        g.model_copy(update={"raised": k, "max_raised_to": g.original_max + k}) if g.name == name else g
        for g in run.groups
    ]
    group = next((g for g in groups if g.name == name), None)
    steps = [
        _in_flight(s, run, group, position, k) if group is not None and s.index in flying else _done(s, run)
        for s in run.steps
    ]
    waiting = "; ".join(f"the agent to take drain command {command_id(run.run_id, i)} up" for i in flying)
    update = {"status": RunStatus.RUNNING, "steps": steps, "groups": groups, "waiting": waiting, "reason": ""}
    return run.model_copy(update={**update, "history_shed": False, "finished_at": None})
