"""``NODE#`` items are validated as the table answered them (``convert=False``: numbers as ``Decimal``), without
``plain``: the record is the one the converted item gives, and an item refused converted is refused unconverted
(readers count and skip it)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from pydantic import ValidationError

from adapters.dynamo.snapshot import read_snapshot
from adapters.dynamo.store import Store
from adapters.dynamo.table import plain
from core.model import NodeRecord, fresh_by_mark

NOW = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)
GOOD: dict[str, Any] = {
    "pk": "CLUSTER#demo#AGENT",
    "sk": "NODE#i-1",
    "instance_id": "i-1",
    "node_name": "n1",
    "ready": True,
    "roles": ["node"],
    "reported_at": NOW.isoformat(),
    "expires_at": Decimal("1709640000"),
}


@pytest.mark.parametrize(
    "change",
    [
        {},
        {"ready": Decimal("1"), "unschedulable": Decimal("0")},
        {"reported_at": Decimal("1709632800"), "expires_at": Decimal("1.7E+9")},
        {"reported_at": Decimal("1709632800.25")},
        {"ready": Decimal("0.5")},
        {"instance_id": Decimal("7")},
        {"roles": [Decimal("1")]},
        {"asg_name": {"a": Decimal("1")}},
        {"node_name": None},
    ],
)
def test_an_unconverted_item_reads_as_its_converted_self(change: dict[str, Any]) -> None:
    raw = {**GOOD, **change}
    for mark in (None, NOW):
        try:
            expected: NodeRecord | None = NodeRecord.confirmed(plain(raw), mark)
        except ValidationError:
            expected = None
        if expected is None:
            with pytest.raises(ValidationError):
                NodeRecord.confirmed(raw, mark)
        else:
            assert NodeRecord.confirmed(raw, mark) == expected
    assert raw == {**GOOD, **change}  # the table's answer is not changed


def test_the_snapshot_skips_an_unreadable_item_and_reads_the_others(store: Store) -> None:
    store.put("NODE#i-1", {k: v for k, v in GOOD.items() if k not in ("pk", "sk")})
    store.put("NODE#i-2", {"instance_id": 7, "node_name": "n2", "reported_at": NOW.isoformat()})
    store.put_membership_mark(NOW, nodes=2, ttl_seconds=600)
    nodes = read_snapshot(store, max_age_seconds=600, now=NOW).nodes
    # the records carry no mark (``NodeRecordMemo``): the fresh mark made every one fresh, judged at the read
    assert [(n.instance_id, n.ready, n.confirmed_at) for n in nodes] == [("i-1", True, None)]


def test_a_naive_report_time_is_refused_as_bad_input(store: Store) -> None:
    # a naive time cannot be compared with the mark or the clock: it was a TypeError out of every membership read
    with pytest.raises(ValidationError):
        NodeRecord.confirmed({**GOOD, "reported_at": "2024-03-05T10:00:00"}, NOW)
    store.put("NODE#i-1", {k: v for k, v in GOOD.items() if k not in ("pk", "sk")})
    store.put("NODE#i-3", {"instance_id": "i-3", "node_name": "n3", "reported_at": "2024-03-05T10:00:00"})
    for mark in (NOW, NOW - timedelta(hours=1)):  # fresh, then stale: each record judged by its own time
        store.put_membership_mark(mark, nodes=2, ttl_seconds=600)
        assert [n.instance_id for n in read_snapshot(store, max_age_seconds=600, now=NOW).nodes] == ["i-1"]


@pytest.mark.parametrize("mark_age", [None, 0, 599, 600, 601, 7200])
@pytest.mark.parametrize("own_age", [0, 600, 601, 7200])
def test_a_fresh_mark_makes_each_record_it_confirms_fresh(mark_age: int | None, own_age: int) -> None:
    mark = None if mark_age is None else NOW - timedelta(seconds=mark_age)
    record = NodeRecord.confirmed({**GOOD, "reported_at": (NOW - timedelta(seconds=own_age)).isoformat()}, mark)
    if fresh_by_mark(mark, NOW, 600):
        assert record.fresh(NOW, 600)
    assert fresh_by_mark(mark, NOW, 600) == (mark is not None and mark_age is not None and mark_age <= 600)
