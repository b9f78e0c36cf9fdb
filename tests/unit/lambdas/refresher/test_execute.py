"""The refresher's executor and ``advance_run`` under the cluster lock: a run whose lease was lost applies nothing
more (moto's DynamoDB for the table, a recording double for AWS)."""

import logging
from datetime import datetime, timedelta
from typing import Any

import pytest

import lambdas.refresher.advance as advance
from adapters.dynamo.lock import LeaseLock
from adapters.dynamo.runs import RunStore
from adapters.dynamo.store import Store
from core.exceptions import LockLostError, RunAlreadyActiveError
from core.model import Command
from core.runs import LOCK_OPERATION, GroupSurge, Run, RunOptions, RunStatus, RunStep, StepState, lock_holder
from core.settings import RefresherSettings
from lambdas.refresher.execute import Effects, execute
from lambdas.refresher.handler import Deps
from lambdas.refresher.plan import AcquireLock, CreateRun, ReleaseLock, SaveRun, SendCommand, SetCapacity
from tests.unit.lambdas.refresher.execute_world import RUN_ID, T0, Recorder, table_calls


def run() -> Run:
    return Run(
        run_id=RUN_ID,
        cluster="demo",
        options=RunOptions(),
        groups=[GroupSurge(name="nodes", role="node", min_size=1, original_desired=2, original_max=3, raised=1)],
        steps=[
            RunStep(
                index=0,
                group="nodes",
                role="node",
                instance_id="i-0123456789abcdef0",
                state=StepState.DRAINING,
                command_id="refresh-0",
            )
        ],
        created_at=T0,
        updated_at=T0,
    )


def effects(store: Store, recorder: Recorder, lease: Any = None) -> Effects:
    return Effects(
        store=store,
        runs=RunStore(store),
        lock=LeaseLock(store, clock=lambda: T0.timestamp()),
        aws=recorder,  # type: ignore[arg-type]  # a recording double of AwsPort
        telemetry=recorder,  # type: ignore[arg-type]  # and of Telemetry
        logger=logging.getLogger("test"),
        ttl_seconds=3600,
        lease=lease,
    )


def actions(saved: Run) -> list[Any]:
    drain = Command(
        command_id="refresh-1",
        cluster="demo",
        kind="drain",
        instance_id="i-0123456789abcdef0",
        deadline=T0 + timedelta(minutes=10),
    )
    return [SaveRun(saved), SetCapacity("nodes", desired=3), SendCommand(drain)]


def test_a_start_fences_the_new_run_by_the_lease_it_just_took(store: Store) -> None:
    recorder = Recorder()
    execute([AcquireLock(run().holder, 1800), CreateRun(run())], effects(store, recorder), T0)
    stored = RunStore(store).get(RUN_ID)
    assert stored is not None and (LeaseLock(store).current() or {})["holder"] == run().holder


def test_a_start_that_finds_another_run_active_under_the_lock_creates_none_and_frees_the_lock(store: Store) -> None:
    """Two manual refreshes at once (found by the fleet simulation, seed 4 of the lock profile): the second read "no
    active run" before the first created its run and released the lock, then took the lock itself. Under the lock
    its CreateRun must find the first run, create nothing and give the lock back (two runs surged one group
    twice, and the second was never advanced)."""
    recorder = Recorder()
    lock = LeaseLock(store, clock=lambda: T0.timestamp())
    lease = lock.acquire(run().holder, LOCK_OPERATION, 1800)
    execute([CreateRun(run())], effects(store, recorder, lease), T0)
    lock.release(lease)  # the first start's pass is over: its run is active, the lock free
    late = run().model_copy(update={"run_id": "20240305T100500Z-fedcba"})

    with pytest.raises(RunAlreadyActiveError) as raised:
        execute([AcquireLock(late.holder, 1800), CreateRun(late)], effects(store, recorder), T0)

    assert raised.value.run_id == RUN_ID
    assert [r.run_id for r in RunStore(store).list(5)] == [RUN_ID]
    assert (LeaseLock(store).current() or {}).get("holder") in (None, "")


def test_a_save_with_a_lost_lease_stops_the_decision_before_any_effect(store: Store) -> None:
    recorder = Recorder()
    lease = LeaseLock(store, clock=lambda: T0.timestamp()).acquire(run().holder, "refresh", 1800)
    RunStore(store).create(run(), fence=lease)
    LeaseLock(store, clock=lambda: T0.timestamp() + 1801).acquire("replenisher:x", "replenish", 120)
    with pytest.raises(LockLostError):
        execute(actions(run()), effects(store, recorder, lease), T0)
    assert recorder.calls == []  # no capacity change, no drain
    stored = RunStore(store).get(RUN_ID)
    assert stored is not None and stored.version == 0 and store.get_command("refresh-1") is None


def _deps(store: Store, recorder: Recorder, now: datetime) -> Deps:
    settings = RefresherSettings(cluster_name="demo", table_name="state", queue_url="q", poll_seconds=0.01)
    return Deps(
        settings=settings, store=store, aws=recorder, telemetry=recorder, clock=lambda: now, sleep=lambda s: None
    )  # type: ignore[arg-type]  # recording doubles


def test_a_run_whose_lock_another_holder_holds_waits_and_applies_nothing(store: Store) -> None:
    recorder = Recorder()
    RunStore(store).create(run())
    LeaseLock(store, clock=lambda: T0.timestamp()).acquire("replenisher:x", "replenish", 120)
    out = advance.advance_run(_deps(store, recorder, T0), None, 1.0)
    assert out["status"] == "advanced" and "replenisher:x" in out["lock"]
    assert [c for c in recorder.calls if c[0] != "metric"] == []
    stored = RunStore(store).get(RUN_ID)
    assert stored is not None and stored.version == 0 and stored.status is RunStatus.RUNNING


def test_a_lock_lost_mid_invocation_stops_the_run_at_its_next_save(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = Recorder()
    RunStore(store).create(run())
    deps = _deps(store, recorder, T0)
    # this invocation holds the lock (as its start leaves it) and reads the world under it
    LeaseLock(store, clock=lambda: T0.timestamp()).acquire(lock_holder(RUN_ID, "inv-1"), "refresh", 180)
    gather = advance.gather

    def gather_then_lose_the_lock(r: Run, d: Any, *rest: Any) -> Any:
        # the lease runs out while this invocation reads the world: another holder takes the lock
        LeaseLock(store, clock=lambda: T0.timestamp() + 3600).acquire("replenisher:x", "replenish", 120)
        return gather(r, d, *rest)

    monkeypatch.setattr(advance, "gather", gather_then_lose_the_lock)
    out = advance.advance_run(deps, None, 1.0, "inv-1")
    assert out["status"] == "lock_lost"
    assert [c for c in recorder.calls if c[0] != "metric"] == []
    assert ("metric", "LockLost") in recorder.calls
    stored = RunStore(store).get(RUN_ID)
    assert stored is not None and stored.version == 0


def test_the_end_of_a_run_releases_only_the_lease_of_the_invocation_that_ended_it(store: Store) -> None:
    recorder = Recorder()
    lock = LeaseLock(store, clock=lambda: T0.timestamp())
    other = lock.acquire(lock_holder(RUN_ID, "other-invocation"), "refresh", 1800)
    out = execute([ReleaseLock(RUN_ID)], effects(store, recorder), T0)  # an invocation holding no lease of its own
    assert out[0]["result"].startswith("not held by this invocation")
    assert (lock.current() or {})["holder"] == other.holder
    lock.release(other)
    mine = lock.acquire(lock_holder(RUN_ID, "this-invocation"), "refresh", 1800)
    out = execute([ReleaseLock(RUN_ID)], effects(store, recorder, mine), T0)
    assert out[0]["result"] == "released" and not (lock.current() or {}).get("holder")


def drains(saved: Run) -> list[Any]:
    return [a for a in actions(saved) if not isinstance(a, SetCapacity)]


def test_a_drain_is_recorded_in_the_transaction_of_the_save_and_then_sent(store: Store) -> None:
    recorder = Recorder()
    lease = LeaseLock(store, clock=lambda: T0.timestamp()).acquire(run().holder, "refresh", 1800)
    RunStore(store).create(run(), fence=lease)
    calls = table_calls(store)
    execute(drains(run()), effects(store, recorder, lease), T0)
    writes = [c for c in calls if c[0] not in ("GetItem", "Query")]
    # with its pointers (adapters.dynamo.command_index), after the index mark
    pointers = ["ICMD#i-0123456789abcdef0#refresh-1", "OCMD#refresh-1"]
    assert writes == [
        ("PutItem", ["ICMD#"]),
        ("TransactWriteItems", ["LOCK", f"RUN#{RUN_ID}", *pointers, "CMD#refresh-1"]),
    ]
    assert recorder.calls == [("send", "refresh-1"), ("metric", "CommandsQueued")]
    item = store.get_command("refresh-1") or {}
    assert item["status"] == "queued" and item["command"]["command_id"] == "refresh-1"
    assert (RunStore(store).get(RUN_ID) or run()).version == 1


@pytest.mark.parametrize(("status", "sent"), [("queued", True), ("running", False)])
def test_a_drain_recorded_already_falls_back_to_the_save_alone_and_the_usual_record(
    store: Store, status: str, sent: bool
) -> None:
    """A drain decided again (a crash between its record and its send): the transaction is cancelled for the command
    only, so the run is saved alone and the command goes the usual way: sent again while still queued, else not."""
    recorder = Recorder()
    lease = LeaseLock(store, clock=lambda: T0.timestamp()).acquire(run().holder, "refresh", 1800)
    RunStore(store).create(run(), fence=lease)
    drain = next(a for a in actions(run()) if isinstance(a, SendCommand)).command
    store.record_command(drain, 3600, now=T0 - timedelta(minutes=1))
    store.update("CMD#refresh-1", {"status": status})
    results = execute(drains(run()), effects(store, recorder, lease), T0)
    assert (RunStore(store).get(RUN_ID) or run()).version == 1
    assert (("send", "refresh-1") in recorder.calls) is sent
    assert (store.get_command("refresh-1") or {})["status"] == status
    assert results[0]["result"] == "saved (version 1)"
