"""The projection of a run at its largest (``core.runpeak``): every step finished but those in flight at once at
``max_surge``, with their surge baselines; never smaller than the states a run really passes through."""

from __future__ import annotations

from datetime import timedelta

import pytest

from bench.run_item import KEYS
from bench.run_item import run as bench_run
from core.itemsize import item_bytes
from core.runpeak import in_flight_group, peak_run
from core.runs import Run, RunOptions, RunStatus, StepState
from tests.unit.core.run_plans import planned


def size(run: Run) -> int:
    return item_bytes({**run.to_item(), **KEYS})


def test_the_steps_in_flight_are_those_of_the_heaviest_group_at_max_surge() -> None:
    run = planned(3, {"small": 4, "big": 20}, masters=3)
    assert in_flight_group(run) == ("big", 3)

    peak = peak_run(run)

    flying = [s for s in peak.steps if s.state.in_flight]
    assert [s.index for s in flying] == [24, 25, 26]  # the last 3 of "big"
    assert all(len(s.surge_baseline) == 20 + 3 and len(set(s.surge_baseline)) == 23 for s in flying)
    assert all(s.surge_instance_id and s.command_id and len(s.waiting_since) >= 5 for s in flying)
    assert all(s.state is StepState.DONE for s in peak.steps if s.index not in {24, 25, 26})
    assert peak.status is RunStatus.RUNNING and peak.surge == {"big": 3} and peak.waiting.count(";") == 2
    assert all(s.state is StepState.PENDING for s in run.steps) and run.surge == {}  # the input unchanged


def test_masters_alone_have_one_step_in_flight_and_max_surge_is_capped_by_the_group() -> None:
    assert in_flight_group(planned(10, {}, masters=3)) == ("master-0", 1)
    assert in_flight_group(planned(10, {"nodes": 2})) == ("nodes", 2)
    assert in_flight_group(planned(10, {})) == (None, 0)
    assert peak_run(planned(10, {})).steps == []


def test_finished_steps_are_rows_and_those_in_flight_maps_and_it_reads_back() -> None:
    peak = peak_run(planned(3, {"a": 30, "b": 30}, masters=3))
    item = peak.to_item()
    assert len(item["rows"]) == 63 - 3 and len(item["steps"]) == 3
    again = Run.model_validate(item)
    assert [s.state for s in again.steps] == [s.state for s in peak.steps]
    assert [len(s.surge_baseline) for s in again.steps if s.state.in_flight] == [33, 33, 33]
    master, worker = again.steps[0], again.steps[3]
    assert master.surge_instance_id is None and master.settle_first_ok_at and "settling" in master.entered
    assert worker.surge_instance_id and worker.spare_ready_at and "surging" in worker.entered


@pytest.mark.parametrize("max_surge", [1, 3, 10])
@pytest.mark.parametrize("steps", [30, 300, 1500])
def test_the_peak_is_never_smaller_than_the_states_the_run_passes_through(max_surge: int, steps: int) -> None:
    """Against the benchmark's run (names as EC2 and kOps give them, times as the refresher records them): its state
    with every step done, and with the last ``max_surge`` of a group in flight with their baselines."""
    run = bench_run(steps, 0)
    run = run.model_copy(update={"options": RunOptions(max_surge=max_surge)})
    peak = size(peak_run(run))
    done = bench_run(steps, steps)
    assert peak >= size(done)
    group = run.groups[0]
    mine = [s.index for s in done.steps if s.group == group.name]
    k = min(max_surge, len(mine))
    later = done.created_at + timedelta(days=30)
    flying = [
        s.model_copy(
            update={
                "state": StepState.DRAINING,
                "surge_baseline": [f"i-0{n + 10**9:016x}" for n in range(group.original_desired + k)],
                "waiting_since": {"spare_launch": later, "spare_ready": later, "nodes_ready": later},
                "intent_at": later,
            }
        )
        if s.index in mine[-k:]
        else s
        for s in done.steps
    ]
    groups = [
        g.model_copy(update={"raised": k, "max_raised_to": g.original_max + k}) if g is group else g
        for g in done.groups
    ]
    mid = done.model_copy(update={"steps": flying, "groups": groups})
    assert peak >= size(mid), (peak, size(mid))
    assert peak <= 1.25 * max(size(mid), size(done))  # conservative, not absurd
