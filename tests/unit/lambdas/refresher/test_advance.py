"""When a pass reads the compensation donors: only when it may surge a worker group for the first time."""

from __future__ import annotations

from datetime import UTC, datetime

from core.runs import GroupSurge, Run, RunOptions, RunStatus, RunStep, StepState
from lambdas.refresher.advance import may_start_a_group

T0 = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)


def run(state: StepState, raised: int = 0, status: RunStatus = RunStatus.RUNNING, role: str = "node") -> Run:
    return Run(
        run_id="r1",
        cluster="c",
        status=status,
        options=RunOptions(),
        created_at=T0,
        updated_at=T0,
        groups=[GroupSurge(name="g", role=role, min_size=1, original_desired=2, original_max=4, raised=raised)],
        steps=[
            RunStep(index=0, group="g", role=role, instance_id="i-00000000000000001", state=state),
            RunStep(index=1, group="g", role=role, instance_id="i-00000000000000002"),
        ],
    )


def test_donors_are_read_only_before_a_groups_first_surge() -> None:
    assert may_start_a_group(run(StepState.PENDING))
    assert may_start_a_group(run(StepState.DONE))  # between two steps, the surge all given back
    assert not may_start_a_group(run(StepState.SURGING, raised=1))  # the group is the run's now
    assert not may_start_a_group(run(StepState.PENDING, status=RunStatus.PAUSING))
    assert not may_start_a_group(run(StepState.PENDING, role="control-plane"))
