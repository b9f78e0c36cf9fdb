"""A run of one worker step draining its old instance with its spare launched and the group raised by one (``run``):
the ``RUN#`` item the run store's tests save and read."""

from __future__ import annotations

from datetime import UTC, datetime

from core.runs import GroupSurge, Run, RunOptions, RunStep, StepState

T0 = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)


def run(run_id: str = "20240305T100000Z-abcdef") -> Run:
    return Run(
        run_id=run_id,
        cluster="demo",
        options=RunOptions(),
        groups=[GroupSurge(name="nodes", role="node", min_size=1, original_desired=2, original_max=3, raised=1)],
        steps=[
            RunStep(
                index=0,
                group="nodes",
                role="node",
                instance_id="i-old",
                state=StepState.DRAINING,
                surge_instance_id="i-new",
            )
        ],
        created_at=T0,
        updated_at=T0,
    )
