"""``RUN#`` retention: a run that is over carries ``expires_at`` (the table's TTL attribute) ``retention_seconds``
after its end, an active one none, and ``list`` leaves out an expired item DynamoDB has not deleted yet (moto's
DynamoDB, which deletes nothing)."""

from datetime import timedelta

from adapters.dynamo.runs import RunStore, expired
from adapters.dynamo.store import Store
from core.runs import RunStatus
from tests.unit.adapters.dynamo.draining_run import T0, run

DAY = 86400


def test_only_a_run_that_is_over_expires_and_from_its_end(store: Store) -> None:
    runs = RunStore(store, retention_seconds=2 * DAY)
    runs.create(run())
    assert "expires_at" not in store.get(RunStore.sk(run().run_id))  # type: ignore[operator]
    active = runs.get(run().run_id)
    assert active is not None
    paused = active.model_copy(update={"status": RunStatus.PAUSING})
    runs.save(runs.save(paused).model_copy(update={"status": RunStatus.CANCELLING}))
    assert "expires_at" not in store.get(RunStore.sk(run().run_id))  # type: ignore[operator]
    current = runs.get(run().run_id)
    assert current is not None
    end = T0 + timedelta(hours=5)
    runs.save(current.model_copy(update={"status": RunStatus.CANCELLED, "finished_at": end}))
    item = store.get(RunStore.sk(run().run_id))
    assert item is not None and item["expires_at"] == int(end.timestamp()) + 2 * DAY


def test_a_run_over_without_an_end_time_expires_from_its_last_update(store: Store) -> None:
    runs = RunStore(store, retention_seconds=DAY)
    failed = run().model_copy(update={"status": RunStatus.FAILED, "updated_at": T0 + timedelta(minutes=3)})
    assert runs.item_of(failed)["expires_at"] == int(T0.timestamp()) + 180 + DAY


def test_list_leaves_out_the_runs_past_their_expiry(store: Store) -> None:
    runs = RunStore(store, retention_seconds=DAY)
    old, recent = run("20240305T100000Z-aaaaaa"), run("20240306T100000Z-bbbbbb")
    for r, end in ((old, T0), (recent, T0 + timedelta(days=1))):
        runs.create(r.model_copy(update={"status": RunStatus.SUCCEEDED, "finished_at": end}))
    active = run("20240307T100000Z-cccccc")
    runs.create(active)
    ids = [r.run_id for r in runs.list(now=T0 + timedelta(days=1, seconds=1))]
    assert ids == [active.run_id, recent.run_id]  # the old one expired a second ago; still stored
    assert [r.run_id for r in runs.list(now=T0 + timedelta(days=2))] == [active.run_id]
    assert len(list(store.query_prefix("RUN#", consistent=True))) == 3
    assert len(runs.list(now=T0)) == 3


def test_expired_reads_only_a_number() -> None:
    assert expired({"expires_at": 100}, 100) and expired({"expires_at": 99.5}, 100)
    assert not expired({"expires_at": 101}, 100)
    assert not expired({}, 100) and not expired({"expires_at": "1"}, 100) and not expired({"expires_at": True}, 100)
