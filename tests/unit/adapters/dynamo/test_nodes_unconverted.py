"""``NODE#`` items are validated as the table answered them (``convert=False``: numbers as ``Decimal``), without
``plain``: the record is the one the converted item gives, and an item refused converted is refused unconverted
(readers count and skip it)."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from pydantic import ValidationError

from adapters.dynamo.snapshot import read_snapshot
from adapters.dynamo.store import Store
from adapters.dynamo.table import plain
from core.model import NodeRecord

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
    assert [(n.instance_id, n.ready, n.confirmed_at) for n in nodes] == [("i-1", True, NOW)]
