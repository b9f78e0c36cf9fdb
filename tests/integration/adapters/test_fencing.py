"""Fenced writes on the local world's moto server (DynamoDB serialised, as ``localworld.aws.MotoServer`` starts it),
from separate clients and threads as separate Lambda invocations would: a write under a stale fencing token is
refused and applies nothing, also while the takeover happens concurrently with the old holder's writes."""

import threading
import time
from datetime import UTC, datetime

import pytest

from adapters.dynamo import ledger as ledger_store
from adapters.dynamo.lock import LeaseLock
from adapters.dynamo.store import Store
from core.exceptions import LedgerConflictError, LockLostError
from core.ledger import Ledger
from core.schema import state_table
from localworld.aws import MotoServer

T0 = 1_700_000_000.0


def _dt() -> datetime:
    return datetime.fromtimestamp(T0, UTC)


@pytest.fixture(scope="module")
def server():
    with MotoServer() as moto:
        yield moto


@pytest.fixture
def table_name(server):
    name = f"fencing-{time.time_ns()}"
    ddb = server.resource("dynamodb")
    ddb.create_table(**state_table(name))
    yield name
    ddb.Table(name).delete()


def store_of(server, table_name, cluster="demo"):
    """A store with its own client (one per invocation)."""
    return Store(server.resource("dynamodb").Table(table_name), cluster)


def test_a_ledger_write_with_a_stale_token_is_refused_and_applies_nothing(server, table_name) -> None:
    old_store, new_store = store_of(server, table_name), store_of(server, table_name)
    old = LeaseLock(old_store, clock=lambda: T0).acquire("replenisher:old", "replenish", 120)
    first = ledger_store.write(old_store, Ledger(asg_name="nodes-a"), None, _dt(), fence=old)
    new = LeaseLock(new_store, clock=lambda: T0 + 121).acquire("replenisher:new", "replenish", 120)
    assert new.fencing == old.fencing + 1
    with pytest.raises(LockLostError) as info:
        ledger_store.write(old_store, first, first.version, _dt(), fence=old)
    assert info.value.current is not None and info.value.current["holder"] == "replenisher:new"
    stored = new_store.get(ledger_store.ledger_sk("nodes-a"))
    assert stored is not None and ledger_store.from_item(stored) == first  # untouched
    # the new holder writes on the same version, fenced by its own lease
    assert ledger_store.write(new_store, first, first.version, _dt(), fence=new).version == 2
    # a holder that still has the lock but read an old version loses on the version, not on the lock
    with pytest.raises(LedgerConflictError):
        ledger_store.write(new_store, first, first.version, _dt(), fence=new)


def test_no_write_of_the_old_holder_lands_after_the_new_holder_took_over(server, table_name) -> None:
    """20 trials: the old holder writes its run as fast as it can from one thread while the lease is taken over
    from another; once the new holder has written, nothing of the old holder's may appear."""
    for trial in range(20):
        cluster = f"trial-{trial}"
        old_store, new_store = store_of(server, table_name, cluster), store_of(server, table_name, cluster)
        old = LeaseLock(old_store, clock=lambda: T0).acquire("refresher:old", "refresh", 60)
        old_store.put("RUN#r", {"writer": "old", "n": 0}, fence=old)
        stop = threading.Event()
        refused: list[int] = []

        def old_writer(old=old, old_store=old_store, stop=stop, refused=refused) -> None:
            n = 0
            while not stop.is_set():
                n += 1
                try:
                    old_store.put("RUN#r", {"writer": "old", "n": n}, fence=old)
                except LockLostError:
                    refused.append(n)
                    return

        writer = threading.Thread(target=old_writer)
        writer.start()
        time.sleep(0.01)
        new = LeaseLock(new_store, clock=lambda: T0 + 61).acquire("replenisher:new", "replenish", 120)
        new_store.put("RUN#r", {"writer": "new", "n": -1}, fence=new)
        writer.join(timeout=5)
        stop.set()
        assert refused, f"trial {trial}: the old holder was never refused"
        assert new_store.get("RUN#r")["writer"] == "new", f"trial {trial}: an old write landed after the takeover"
