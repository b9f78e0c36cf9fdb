"""The lease lock under contention, on a moto server shared by real threads (one HTTP request each)."""

import threading

import boto3
import pytest
from moto.server import ThreadedMotoServer

from adapters.dynamo.lock import LeaseLock
from adapters.dynamo.store import Store
from core.exceptions import LockHeldError, LockLostError
from core.schema import state_table


@pytest.fixture(scope="module")
def endpoint():
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def table(endpoint):
    ddb = boto3.resource(
        "dynamodb",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    created = ddb.create_table(**state_table(f"lock-{threading.get_ident()}-{id(endpoint)}"))
    yield created
    created.delete()


def _contend(table, holders, clock=None):
    barrier = threading.Barrier(len(holders))
    won, lost, errors = [], [], []

    def contender(name):
        # Each contender has its own client, as separate Lambda invocations would.
        store = Store(
            boto3.resource(
                "dynamodb",
                endpoint_url=table.meta.client.meta.endpoint_url,
                region_name="us-east-1",
                aws_access_key_id="testing",
                aws_secret_access_key="testing",
            ).Table(table.name),
            "demo",
        )
        lock = LeaseLock(store, clock=clock) if clock else LeaseLock(store)
        barrier.wait()
        try:
            won.append(lock.acquire(name, "replenish", lease_seconds=30))
        except LockHeldError as err:
            lost.append((name, err.holder))
        except Exception as err:  # noqa: BLE001 - any other outcome fails the test below
            errors.append(err)

    threads = [threading.Thread(target=contender, args=(h,)) for h in holders]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    return won, lost, errors


def test_ten_contenders_exactly_one_wins(table):
    won, lost, errors = _contend(table, [f"holder-{i}" for i in range(10)])
    assert errors == []
    assert len(won) == 1 and len(lost) == 9
    assert all(holder == won[0].holder for _, holder in lost)
    assert won[0].fencing == 1


def test_expired_lease_is_taken_over_once_with_higher_fencing(table):
    store = Store(table, "demo")
    first = LeaseLock(store).acquire("crashed-run", "refresh", lease_seconds=5)
    later = lambda: first.expires_at + 1  # noqa: E731 - a clock past the lease
    won, lost, errors = _contend(table, [f"holder-{i}" for i in range(10)], clock=later)
    assert errors == []
    assert len(won) == 1 and len(lost) == 9
    assert won[0].fencing == first.fencing + 1
    # The old holder learns it lost the lease instead of acting on it.
    with pytest.raises(LockLostError):
        LeaseLock(store).renew(first, lease_seconds=5)
