"""``RUN#`` items: versioned saves and what other capacity operations read of the active run (moto's DynamoDB)."""

import pytest

from adapters.dynamo.commands import command_sk, recording
from adapters.dynamo.lock import LOCK_SK, LeaseLock
from adapters.dynamo.runs import RunStore, surge_capacity, surge_instance_ids
from adapters.dynamo.store import Store
from core.exceptions import CommandExistsError, LockHeldError, LockLostError, RunConflictError
from core.model import Command, CommandKind
from core.runs import RunStatus
from tests.dynamo_reads import answered_sort_keys
from tests.unit.adapters.dynamo.draining_run import T0, run


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


def test_a_save_that_takes_the_lock_takes_it_only_as_it_was_read(store: Store) -> None:
    now = [1000.0]
    lock, runs = LeaseLock(store, clock=lambda: now[0]), RunStore(store)
    runs.create(run())
    seen = store.get(LOCK_SK)  # None: never taken
    stale = lock.taking("refresher:r:b", "refresh", 60, seen)
    taking = lock.taking("refresher:r:a", "refresh", 60, seen)
    saved = runs.save(run(), take=taking)  # one transaction: the lock taken and the run saved
    item = lock.current() or {}
    assert (
        (item["holder"], item["fencing"], saved.version)
        == ("refresher:r:a", 1, 1)
        == (
            taking.lease.holder,
            taking.lease.fencing,
            1,
        )
    )
    # another holder that read the lock before it was taken: refused, nothing written (neither lock nor run)
    with pytest.raises(LockHeldError):
        runs.save(saved, take=stale)
    assert (lock.current() or {})["holder"] == "refresher:r:a" and (runs.get(run().run_id) or run()).version == 1
    # the holder's last save gives the lock up in the same write; a lease lost already writes nothing
    runs.save(saved, fence=taking.lease, release_at=now[0])
    item = lock.current() or {}
    assert item.get("holder") is None and item["fencing"] == 1 and (runs.get(run().run_id) or run()).version == 2
    with pytest.raises(LockLostError):
        runs.save(saved.model_copy(update={"version": 2}), fence=taking.lease, release_at=now[0])
    assert (runs.get(run().run_id) or run()).version == 2
    # the next holder reads the released lock and takes it with the next fencing value
    assert lock.taking("refresher:r:c", "refresh", 60, lock.current()).lease.fencing == 2


def _drain(command_id: str) -> Command:
    return Command(
        command_id=command_id,
        cluster="demo",
        kind=CommandKind.DRAIN,
        instance_id="i-0123456789abcdef0",
        node_name="node-old",
        reason="refresh r step 0",
        deadline=T0,
    )


def test_a_save_records_its_commands_in_the_same_transaction_as_record_command_would(store: Store) -> None:
    lease = LeaseLock(store, clock=lambda: 1000.0).acquire("refresher:r", "refresh", 10)
    runs = RunStore(store)
    runs.create(run(), fence=lease)
    saved = runs.save(run(), fence=lease, also=[recording(_drain("refresh-r-0"), 3600, T0)])
    assert saved.version == 1 and (runs.get(run().run_id) or run()).version == 1
    store.record_command(_drain("refresh-r-1"), 3600, now=T0)
    # byte for byte the item ``record_command`` writes (the agent binds a message to it): only the id differs
    ours, theirs = store.get_command("refresh-r-0") or {}, store.get_command("refresh-r-1") or {}
    assert theirs["command"].pop("command_id") == "refresh-r-1" and ours["command"].pop("command_id") == "refresh-r-0"
    assert {k: v for k, v in ours.items() if k != "sk"} == {k: v for k, v in theirs.items() if k != "sk"}


def test_a_save_whose_command_exists_writes_nothing_and_says_so_but_a_stale_version_or_lease_wins(store: Store) -> None:
    lock = LeaseLock(store, clock=lambda: 1000.0)
    lease = lock.acquire("refresher:r", "refresh", 10)
    runs = RunStore(store)
    runs.create(run(), fence=lease)
    store.record_command(_drain("refresh-r-0"), 3600, now=T0)
    store.update(command_sk("refresh-r-0"), {"status": "running"})
    with pytest.raises(CommandExistsError) as exists:
        runs.save(run(), fence=lease, also=[recording(_drain("refresh-r-0"), 3600, T0)])
    assert (exists.value.current or {}).get("status") == "running"  # the item as it is (ALL_OLD)
    assert (runs.get(run().run_id) or run()).version == 0  # nothing of the transaction written
    assert (store.get_command("refresh-r-0") or {})["status"] == "running"
    # a version conflict is never taken for the command's: it is the save's own
    stale = run().model_copy(update={"version": 5})
    with pytest.raises(RunConflictError):
        runs.save(stale, fence=lease, also=[recording(_drain("refresh-r-0"), 3600, T0)])
    # nor a lost lease
    LeaseLock(store, clock=lambda: 2000.0).acquire("replenisher:x", "replenish", 10)
    with pytest.raises(LockLostError):
        runs.save(run(), fence=lease, also=[recording(_drain("refresh-r-0"), 3600, T0)])
    with pytest.raises(LockLostError):
        runs.save(run(), fence=lease, also=[recording(_drain("refresh-r-9"), 3600, T0)])
    assert store.get_command("refresh-r-9") is None and (runs.get(run().run_id) or run()).version == 0


def test_more_items_in_a_save_need_a_fence(store: Store) -> None:
    runs = RunStore(store)
    runs.create(run())
    with pytest.raises(ValueError):
        runs.save(run(), also=[recording(_drain("refresh-r-0"), 3600, T0)])


def test_a_save_that_passes_the_lock_takes_it_as_read_and_leaves_it_free_with_the_next_fencing(store: Store) -> None:
    now = [1000.0]
    lock, runs = LeaseLock(store, clock=lambda: now[0]), RunStore(store)
    old = lock.acquire("replenisher:x", "replenish", 10)  # an earlier holder, whose lease then expires
    runs.create(run())
    now[0] = 2000.0
    seen = lock.current()
    stale = lock.taking("refresher:r:b", "refresh", 60, seen)
    passing = lock.passing("refresher:r:a", "refresh", seen)
    saved = runs.save(run(), take=passing, also=[recording(_drain("refresh-r-0"), 3600, T0)])
    item = lock.current() or {}
    assert item.get("holder") is None and item["fencing"] == old.fencing + 1 == passing.lease.fencing
    assert saved.version == 1 and store.get_command("refresh-r-0") is not None
    # what read the lock before the pass's write is refused (as after a take), and so is the earlier holder
    with pytest.raises(LockHeldError):
        runs.save(saved, take=stale)
    with pytest.raises(LockLostError):
        lock.renew(old, 10)
    # the next holder takes the free lock with the fencing after the passed one
    assert lock.taking("refresher:r:c", "refresh", 60, lock.current()).lease.fencing == old.fencing + 2
    # a pass that read the lock while another held it cannot pass it either: nothing written
    held = lock.acquire("replenisher:y", "replenish", 60)
    with pytest.raises(LockHeldError):
        runs.save(saved, take=lock.passing("refresher:r:d", "refresh", seen))
    assert (lock.current() or {})["holder"] == held.holder and (runs.get(run().run_id) or run()).version == 1


def test_the_active_run_is_read_without_the_runs_that_are_over(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    # a Spot warning reads the active run: the finished ones (kept until their TTL, large) are never sent to it, so
    # one that does not even validate any more costs it nothing
    store.put("RUN#20240101T000000Z-old", {"run_id": "old", "status": RunStatus.SUCCEEDED.value, "steps": "junk"})
    store.put("RUN#20240102T000000Z-old", {"run_id": "old2", "status": RunStatus.PAUSED.value, "steps": "junk"})
    RunStore(store).create(run())
    answered = answered_sort_keys(monkeypatch, store.table)

    active = RunStore(store).active()

    assert active is not None and active.run_id == run().run_id
    assert answered == [f"RUN#{run().run_id}"]
