"""``RUN#`` items: versioned saves and what other capacity operations read of the active run (moto's DynamoDB)."""

from datetime import UTC, datetime

import pytest

from adapters.dynamo.runs import RunStore, surge_capacity, surge_instance_ids
from adapters.dynamo.store import Store
from core.exceptions import RunConflictError
from core.runs import GroupSurge, Run, RunOptions, RunStatus, RunStep, StepState

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


def test_saves_are_conditioned_on_the_version(store: Store) -> None:
    runs = RunStore(store)
    runs.create(run())
    with pytest.raises(RunConflictError):
        runs.create(run())
    first = runs.get(run().run_id)
    assert first is not None and first.version == 0
    saved = runs.save(first)
    assert saved.version == 1
    with pytest.raises(RunConflictError):
        runs.save(first)
    assert [r.run_id for r in runs.list()] == [run().run_id]


def test_only_the_active_run_surge_is_protected(store: Store) -> None:
    assert surge_capacity(store) == {} and surge_instance_ids(store) == set()
    RunStore(store).create(run())
    assert surge_capacity(store) == {"nodes": 1} and surge_instance_ids(store) == {"i-new"}
    done = RunStore(store).get(run().run_id)
    assert done is not None
    RunStore(store).save(done.model_copy(update={"status": RunStatus.SUCCEEDED}))
    assert RunStore(store).active() is None and surge_capacity(store) == {}
