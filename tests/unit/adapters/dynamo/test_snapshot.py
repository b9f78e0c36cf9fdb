"""One read of the lock, membership, the pollers and the active runs (adapters.dynamo.snapshot) on moto's DynamoDB:
what it returns and that it is two calls (one per partition: the cluster's, then the agent's)."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from adapters.dynamo.ledger import PREFIX as COMP_PREFIX
from adapters.dynamo.lock import LeaseLock
from adapters.dynamo.node_memo import REUSE_SECONDS, NodeRecordMemo
from adapters.dynamo.poller import claim
from adapters.dynamo.runs import RunStore
from adapters.dynamo.snapshot import read_snapshot
from adapters.dynamo.store import Store
from core.model import Command, NodeRecord
from core.runs import Run, RunOptions, RunStatus

NOW = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)


def calls(store: Store) -> Counter[str]:
    counted: Counter[str] = Counter()

    def count(model: Any, **_: Any) -> None:
        counted[model.name] += 1

    store.table.meta.client.meta.events.register("before-call", count)
    return counted


def run(run_id: str, status: RunStatus) -> Run:
    return Run(run_id=run_id, cluster="demo", status=status, options=RunOptions(), created_at=NOW, updated_at=NOW)


def test_two_queries_return_the_lock_fresh_membership_and_only_the_active_run(store: Store) -> None:
    runs = RunStore(store)
    for run_id, status in (("20240101T000000Z-000001", RunStatus.SUCCEEDED), ("20240301T000000Z-000002", "running")):
        runs.create(run(run_id, RunStatus(status)))
    lease = LeaseLock(store, clock=lambda: NOW.timestamp()).acquire("replenisher:r", "replenish", 60)
    store.put_node(NodeRecord(instance_id="i-1", node_name="n1", ready=True, reported_at=NOW), ttl_seconds=600)
    old = NOW - timedelta(hours=2)
    store.put_node(NodeRecord(instance_id="i-2", node_name="n2", reported_at=old), ttl_seconds=600)
    store.put_membership_mark(old, nodes=2, ttl_seconds=600)  # confirms nothing newer than i-2's own time
    store.put(f"{COMP_PREFIX}nodes-a", {"asg_name": "nodes-a"})  # other item kinds, outside the range
    store.record_command(
        Command(command_id="c1", cluster="demo", kind="drain", instance_id="i-0123456789abcdef0", deadline=NOW), 60, NOW
    )
    assert claim(store, "20240301T000000Z-000002", "req-1", NOW.timestamp() + 60)
    assert not claim(store, "20240301T000000Z-000002", "req-2", NOW.timestamp() + 30)  # its budget ends sooner
    counted = calls(store)
    snapshot = read_snapshot(store, max_age_seconds=600, now=NOW)
    assert dict(counted) == {"Query": 2}
    assert snapshot.lock is not None and snapshot.lock["holder"] == lease.holder
    assert [n.instance_id for n in snapshot.nodes] == ["i-1"]  # i-2 is stale
    assert [r.run_id for r in snapshot.runs] == ["20240301T000000Z-000002"]
    assert snapshot.run(None) is snapshot.runs[0] and snapshot.run("20240101T000000Z-000001") is None
    assert snapshot.pollers == {"20240301T000000Z-000002": ("req-1", NOW.timestamp() + 60)}


def test_an_empty_partition_reads_as_nothing(store: Store) -> None:
    snapshot = read_snapshot(store, max_age_seconds=600, now=NOW)
    assert (snapshot.lock, snapshot.nodes, snapshot.runs) == (None, [], [])


def test_a_memo_answers_an_unchanged_record_and_sees_a_changed_or_stale_one(store: Store) -> None:
    """The refresher's warm reads (``Deps.memo``): an unchanged item's record is the one kept, a rewritten item is
    read anew, and freshness is judged on every read (by the mark, else by the record's own time)."""
    memo = NodeRecordMemo()
    store.put_node(NodeRecord(instance_id="i-1", node_name="n1", ready=False, reported_at=NOW), ttl_seconds=600)
    store.put_node(NodeRecord(instance_id="i-2", node_name="n2", ready=True, reported_at=NOW), ttl_seconds=600)
    store.put_membership_mark(NOW, nodes=2, ttl_seconds=600)
    first = {n.instance_id: n for n in read_snapshot(store, max_age_seconds=600, now=NOW, memo=memo).nodes}
    store.put_node(NodeRecord(instance_id="i-1", node_name="n1", ready=True, reported_at=NOW), ttl_seconds=600)
    second = {n.instance_id: n for n in read_snapshot(store, max_age_seconds=600, now=NOW, memo=memo).nodes}
    assert second["i-2"] is first["i-2"]  # unchanged: not validated again
    assert (first["i-1"].ready, second["i-1"].ready) == (False, True)  # rewritten by the agent: read anew
    # the mark fresh confirms both; 20 minutes on, with no newer mark, both are stale (600 s) although kept
    assert len(read_snapshot(store, max_age_seconds=600, now=NOW + timedelta(minutes=5), memo=memo).nodes) == 2
    assert read_snapshot(store, max_age_seconds=600, now=NOW + timedelta(minutes=20), memo=memo).nodes == []
    store.put_membership_mark(NOW + timedelta(minutes=19), nodes=2, ttl_seconds=600)
    assert len(read_snapshot(store, max_age_seconds=600, now=NOW + timedelta(minutes=20), memo=memo).nodes) == 2


def test_a_mark_at_the_version_read_before_answers_with_that_read(store: Store) -> None:
    """The refresher's pass: the mark's version as at the last read (within ``REUSE_SECONDS``) answers with that read's
    records, not the items' again; a new version, no version, or a read too old reads the items."""
    memo = NodeRecordMemo()
    store.put_node(NodeRecord(instance_id="i-1", node_name="n1", ready=False, reported_at=NOW), ttl_seconds=600)
    store.put_membership_mark(NOW, nodes=1, ttl_seconds=600, version="t:1")
    first = read_snapshot(store, max_age_seconds=600, now=NOW, memo=memo).nodes
    # written without a new version (what the version cannot see: a write by anything but the agent)
    store.put_node(NodeRecord(instance_id="i-1", node_name="n1", ready=True, reported_at=NOW), ttl_seconds=600)
    counted = calls(store)
    again = read_snapshot(store, max_age_seconds=600, now=NOW + timedelta(seconds=30), memo=memo).nodes
    assert again is first and not again[0].ready and dict(counted) == {"Query": 2}  # the same calls
    later = NOW + timedelta(seconds=REUSE_SECONDS + 1)
    assert [n.ready for n in read_snapshot(store, max_age_seconds=1200, now=later, memo=memo).nodes] == [True]
    store.put_node(NodeRecord(instance_id="i-1", node_name="n1", ready=False, reported_at=later), ttl_seconds=600)
    store.put_membership_mark(later, nodes=1, ttl_seconds=600, version="t:2")
    soon = later + timedelta(seconds=30)
    assert [n.ready for n in read_snapshot(store, max_age_seconds=600, now=soon, memo=memo).nodes] == [False]
    store.put_node(NodeRecord(instance_id="i-1", node_name="n1", ready=True, reported_at=later), ttl_seconds=600)
    store.put_membership_mark(later, nodes=1, ttl_seconds=600)  # an older agent: no version, never reused
    for _ in range(2):
        assert [n.ready for n in read_snapshot(store, max_age_seconds=600, now=soon, memo=memo).nodes] == [True]
