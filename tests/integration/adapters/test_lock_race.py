"""The lease lock under contention, on the local world's moto server (DynamoDB serialised as
``localworld.aws.serialise_dynamodb`` makes it) shared by real threads (one HTTP request each).

The harness (``localworld.lockrace``) is shown to fail: a lock whose check and write are separated finds double
grants, and so does the real lock once moto's DynamoDB is unserialised and its condition-to-write gap widened. The
1,000-trial run is ``python -m bench.lock_race`` (BENCHMARKS.md).
"""

import threading

import boto3
import pytest

from adapters.dynamo.lock import LeaseLock
from adapters.dynamo.store import Store
from core.exceptions import LockHeldError, LockLostError
from core.schema import state_table
from localworld.aws import MotoServer
from localworld.lockrace import condition_gap, race, racy_acquire, unserialised_dynamodb

TRIALS = 100  # about 12 s on 2 cores; bench.lock_race runs 1,000


@pytest.fixture(scope="module")
def server():
    with MotoServer() as moto:
        yield moto


@pytest.fixture(scope="module")
def endpoint(server):
    return server.endpoint_url


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


def test_harness_finds_no_double_grant_of_the_lease_lock(server):
    report = race(server.session(), TRIALS)
    assert report.errors == []
    assert report.double_grants == 0, report.summary()
    assert report.winners == {1: TRIALS}, report.summary()


def test_harness_catches_a_lock_whose_check_and_write_are_separated(server):
    report = race(server.session(), 10, acquire=racy_acquire(0.02))
    assert report.errors == []
    assert report.double_grants > 0, report.summary()


def test_serialised_dynamodb_keeps_the_lock_atomic_with_a_gap_between_condition_and_write(server):
    with condition_gap(0.02):
        report = race(server.session(), 6)
    assert report.errors == []
    assert report.winners == {1: 6}, report.summary()


def test_unserialised_moto_grants_the_lock_twice_with_that_gap(server):
    # what the local world was before: moto's own DynamoDB checks a condition and then writes, with no lock
    with condition_gap(0.02), unserialised_dynamodb():
        report = race(server.session(), 6)
    assert report.errors == []
    assert report.double_grants > 0, report.summary()
