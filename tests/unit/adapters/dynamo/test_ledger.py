"""``COMP#`` items: whole-item writes conditioned on the version read (moto's DynamoDB)."""

from datetime import UTC, datetime

import pytest

from adapters.dynamo import ledger as ledger_store
from adapters.dynamo.store import Store
from core.exceptions import LedgerConflictError
from core.ledger import Backoff, Ledger

T0 = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)


def test_writes_are_versioned_and_read_back(store: Store) -> None:
    first = ledger_store.write(store, Ledger(asg_name="nodes-a"), None, T0)
    assert first.version == 1
    with pytest.raises(LedgerConflictError):
        ledger_store.write(store, Ledger(asg_name="nodes-a"), None, T0)
    second = ledger_store.write(store, first.model_copy(update={"backoff": Backoff(window_seconds=300)}), 1, T0)
    with pytest.raises(LedgerConflictError) as info:
        ledger_store.write(store, first, 1, T0)
    assert info.value.current is not None and info.value.current["version"] == 2
    item = store.get(ledger_store.ledger_sk("nodes-a"))
    assert item is not None and ledger_store.from_item(item) == second


def test_a_write_fenced_by_a_lease_taken_over_is_refused_and_applies_nothing(store: Store) -> None:
    from adapters.dynamo.lock import LeaseLock
    from core.exceptions import LockLostError

    old = LeaseLock(store, clock=lambda: 1000.0).acquire("replenisher:a", "replenish", 10)
    written = ledger_store.write(store, Ledger(asg_name="nodes-a"), None, T0, fence=old)
    LeaseLock(store, clock=lambda: 2000.0).acquire("refresher:r", "refresh", 10)  # the lease expired: taken over
    with pytest.raises(LockLostError):
        ledger_store.write(store, written.model_copy(update={"backoff": Backoff(window_seconds=300)}), 1, T0, fence=old)
    item = store.get(ledger_store.ledger_sk("nodes-a"))
    assert item is not None and ledger_store.from_item(item) == written
