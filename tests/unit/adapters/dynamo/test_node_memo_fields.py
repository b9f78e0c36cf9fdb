"""``NodeRecordMemo.records`` read through a memo, over reads of items whose fields are present or absent and of
any type (all fields read at once, or one by one when one is absent), answers what validating every item answers,
and its map by instance id is the map of its list (property-based: hypothesis)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

pytest.importorskip("hypothesis", reason="hypothesis (requirements-dev.txt) is not installed")

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from adapters.dynamo.node_memo import _VALUES, FIELDS, NodeRecordMemo
from core.model import NodeRecord

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
THEN = (NOW - timedelta(minutes=5)).isoformat()

# each field's values: ones the agent writes, and equal ones of other types, wrong types and absent (None here
# means "no such attribute"; ``NULL`` an attribute holding None)
NULL = "<null>"
VALUES: dict[str, list[Any]] = {
    "instance_id": ["i-1", "i-2", 1, None],
    "node_name": ["n1", "n2", 2, None],
    "availability_zone": ["us-east-1a", "", NULL, None],
    "asg_name": ["nodes-a", NULL, True, None],
    "ready": [True, False, 1, Decimal(1), 0, NULL, None],
    "unschedulable": [False, True, 0, Decimal(0), None],
    "ending": [False, True, 0, NULL, None],
    "roles": [["node"], [], ["node", "spot"], [1], [True], "node", None],
    "instance_group": ["nodes-a", NULL, None],
    "reported_at": [THEN, NOW.isoformat(), 1, Decimal(1), 1.0, True, "yesterday", None],
}
assert set(VALUES) == set(FIELDS)

AGENTS = {name: values[0] for name, values in VALUES.items()}  # what the agent writes: every field, of its type
fields = st.fixed_dictionaries({name: st.sampled_from(values) for name, values in VALUES.items()})
# a read: some items changed or put anew, each either a whole item drawn or the item as it was with one field changed
change = st.tuples(st.integers(0, 3), fields | st.tuples(st.sampled_from(sorted(VALUES)), st.integers(0, 7)))
reads = st.lists(st.lists(change, max_size=4), min_size=1, max_size=6)


def item(slot: int, chosen: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"pk": "CLUSTER#demo#AGENT", "sk": f"NODE#i-{slot}", "expires_at": Decimal(1767657660)}
    for name, value in chosen.items():
        if value is not None:
            out[name] = None if value is NULL else (list(value) if isinstance(value, list) else value)
    return out


def validated(items: list[dict[str, Any]]) -> tuple[list[NodeRecord], list[str]]:
    records, refused = [], []
    for one in items:
        try:
            records.append(NodeRecord.model_validate(one))
        except ValidationError:
            refused.append(one["sk"])
    return records, refused


@settings(max_examples=400, deadline=None)
@given(steps=reads)
def test_a_read_through_the_memo_answers_what_validating_every_item_answers(steps: list[Any]) -> None:
    memo = NodeRecordMemo()
    chosen: dict[int, dict[str, Any]] = {}
    for step in steps:
        for slot, drawn in step:
            if isinstance(drawn, dict):
                chosen[slot] = drawn
            else:  # one field of the slot's item (the agent's item when there is none yet) changed
                name, at = drawn
                chosen[slot] = {**chosen.get(slot, AGENTS), name: VALUES[name][at % len(VALUES[name])]}
        items = [item(slot, chosen[slot]) for slot in sorted(chosen)]
        records, refused = memo.records(items, None, version="t:0", now=NOW)
        again, refused_again = memo.records([dict(i) for i in items], None, version="t:0", now=NOW)

        expected, expected_refused = validated(items)
        for answer, bad in ((records, refused), (again, refused_again)):
            assert answer == expected
            assert [type(getattr(r, name)) for r in answer for name in FIELDS] == [
                type(getattr(r, name)) for r in expected for name in FIELDS
            ]
            assert [r.sk for r in bad] == expected_refused
        assert memo.by_instance(again) == {r.instance_id: r for r in expected}


@pytest.mark.parametrize("name", FIELDS)
@pytest.mark.parametrize("absent_first", [True, False])
def test_a_field_absent_and_a_field_holding_none_are_told_apart(name: str, absent_first: bool) -> None:
    memo = NodeRecordMemo()
    absent, null = item(1, {**AGENTS, name: None}), item(1, {**AGENTS, name: NULL})
    for one in (absent, null) if absent_first else (null, absent):
        records, refused = memo.records([one], None, version="t:0", now=NOW)
        assert (records, [r.sk for r in refused]) == validated([one])


def test_the_fields_read_at_once_are_a_tuple_of_every_field() -> None:
    """``itemgetter`` of one name answers the bare value, not a 1-tuple: the memo's read at once needs at least two
    fields (a record's nine), and answers each field at its position."""
    item = {name: f"v{at}" for at, name in enumerate(FIELDS)}
    assert len(FIELDS) > 1
    assert _VALUES(item) == tuple(f"v{at}" for at in range(len(FIELDS)))
