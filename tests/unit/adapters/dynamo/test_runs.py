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


def test_a_save_fenced_by_a_lost_lease_is_refused_and_applies_nothing(store: Store) -> None:
    from adapters.dynamo.lock import LeaseLock
    from core.exceptions import LockLostError

    runs = RunStore(store)
    lease = LeaseLock(store, clock=lambda: 1000.0).acquire("refresher:r", "refresh", 10)
    runs.create(run(), fence=lease)
    saved = runs.save(runs.get(run().run_id), fence=lease)  # type: ignore[arg-type]  # created just above
    assert saved.version == 1
    LeaseLock(store, clock=lambda: 2000.0).acquire("replenisher:x", "replenish", 10)
    with pytest.raises(LockLostError):
        runs.save(saved.model_copy(update={"status": RunStatus.PAUSING}), fence=lease)
    stored = runs.get(run().run_id)
    assert stored is not None and stored.version == 1 and stored.status is RunStatus.RUNNING
    with pytest.raises(LockLostError):
        runs.create(run("20240305T110000Z-other"), fence=lease)
    assert runs.get("20240305T110000Z-other") is None
