"""The ``LOCK`` lease: acquisition, renewal, take-over after expiry, release (moto's DynamoDB)."""

import pytest

from adapters.dynamo.lock import LeaseLock
from adapters.dynamo.store import Store
from core.exceptions import LockHeldError, LockLostError


def test_lease_lifecycle(store: Store) -> None:
    now = [1000.0]
    lock = LeaseLock(store, clock=lambda: now[0])
    a = lock.acquire("a", "refresh", lease_seconds=60)
    assert a.fencing == 1
    assert lock.acquire("a", "refresh", lease_seconds=60).fencing == 1  # a renewal keeps the fencing value
    with pytest.raises(LockHeldError) as info:
        lock.acquire("b", "replenish", lease_seconds=60)
    assert info.value.holder == "a"
    now[0] += 61
    b = lock.acquire("b", "replenish", lease_seconds=60)
    assert b.fencing == 2
    with pytest.raises(LockLostError):
        lock.renew(a, 60)
    lock.release(a)  # lost already: nothing to give up
    lock.release(b)
    current = lock.current()
    assert current is not None and current.get("holder") is None and current["fencing"] == 2
    assert lock.acquire("c", "refresh", lease_seconds=60).fencing == 3
