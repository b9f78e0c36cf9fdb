"""``NodeRecordMemo.by_instance``: the records of an answer by instance id, made once for the memo's last answer and,
after a patched answer, changed from the one before by the items it applied; always the map made from the list
(the later record of an id held twice), whatever the changes (property-based: hypothesis)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

pytest.importorskip("hypothesis", reason="hypothesis (requirements-dev.txt) is not installed")

from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.dynamo.node_memo import NodeRecordMemo
from core.model import NodeRecord

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


def item(slot: int, owner: int, ready: bool = True) -> dict[str, Any]:
    """The item of sort key ``slot`` naming instance ``owner`` (another slot's instance: an id held twice)."""
    return {
        "sk": f"NODE#i-{slot:017x}",
        "instance_id": f"i-{owner:017x}",
        "node_name": f"n{slot}",
        "ready": ready,
        "reported_at": (NOW - timedelta(minutes=1)).isoformat(),
    }


def keyed(records: list[NodeRecord]) -> dict[str, NodeRecord]:
    return {r.instance_id: r for r in records}


# a change: (slot, None) deletes the item, (slot, owner) writes it naming instance ``owner``
changes = st.lists(st.tuples(st.integers(0, 7), st.none() | st.integers(0, 7)), min_size=1, max_size=6)


@settings(max_examples=300, deadline=None)
@given(start=st.lists(st.integers(0, 7), min_size=0, max_size=8), steps=st.lists(changes, max_size=5))
def test_the_map_of_a_patched_answer_is_the_map_of_its_list(start: list[int], steps: list[Any]) -> None:
    memo = NodeRecordMemo()
    items = {f"NODE#i-{s:017x}": item(s, s) for s in start}
    records, _ = memo.records(sorted(items.values(), key=lambda i: i["sk"]), NOW, version="t:0", now=NOW)
    assert memo.by_instance(records) == keyed(records)
    count = 0
    for step in steps:
        listed = []
        for slot, owner in step:
            count += 1
            sk = f"NODE#i-{slot:017x}"
            if owner is None:
                items.pop(sk, None)
            else:
                items[sk] = item(slot, owner, ready=bool(count % 2))
            listed.append((count, sk))
        answer = sorted(items.values(), key=lambda i: i["sk"])
        got = memo.patched(
            f"t:{count}", listed, NOW, lambda keys: {k: items[k] for k in keys if k in items}, len(answer)
        )
        assert got is not None
        mapped = memo.by_instance(got[0])
        assert mapped == keyed(got[0]) and all(mapped[k] is v for k, v in keyed(got[0]).items())
        assert memo.by_instance(got[0]) is mapped  # made once for the answer


def test_a_list_the_memo_did_not_answer_is_keyed_on_its_own() -> None:
    memo = NodeRecordMemo()
    records, _ = memo.records([item(1, 1), item(2, 2)], NOW, version="t:0", now=NOW)
    mine = memo.by_instance(records)
    fresh = [r for r in records if r.instance_id.endswith("1")]  # a filtered list (records not fresh by the mark)
    assert memo.by_instance(fresh) == keyed(fresh) and memo.by_instance(records) is mine
    again, _ = memo.records([item(1, 1), item(2, 2)], NOW, version="t:0", now=NOW)  # a full read: a new answer
    assert memo.by_instance(again) is not mine and memo.by_instance(again) == mine


def test_a_full_read_after_a_patched_one_matches_the_items_it_applied() -> None:
    # a patched answer keeps what it validated in the memo's entries: the next full read (every REUSE_SECONDS at the
    # replenisher's tick) matches those items instead of validating them again, and forgets a deleted one
    memo = NodeRecordMemo()
    items = {f"NODE#i-{s:017x}": item(s, s) for s in range(4)}
    memo.records(sorted(items.values(), key=lambda i: i["sk"]), NOW, version="t:0", now=NOW)
    items["NODE#i-00000000000000001"] = item(1, 1, ready=False)
    del items["NODE#i-00000000000000002"]
    listed = [(1, "NODE#i-00000000000000001"), (2, "NODE#i-00000000000000002")]
    patched = memo.patched("t:2", listed, NOW, lambda keys: {k: items[k] for k in keys if k in items}, len(items))
    assert patched is not None and len(memo) == 3
    changed = next(r for r in patched[0] if r.instance_id.endswith("1"))
    full, _ = memo.records(sorted(items.values(), key=lambda i: i["sk"]), NOW, version="t:2", now=NOW)
    assert next(r for r in full if r.instance_id.endswith("1")) is changed and not changed.ready


# a change: (slot, None) deletes the item, (slot, True/False) writes it ready or not, (slot, "x") writes it unreadable
rewrites = st.lists(st.tuples(st.integers(0, 7), st.none() | st.booleans() | st.just("x")), min_size=1, max_size=6)


@settings(max_examples=300, deadline=None)
@given(start=st.lists(st.integers(0, 7), max_size=8), steps=st.lists(rewrites, max_size=5))
def test_a_patched_answer_is_a_full_reads_in_its_order(start: list[int], steps: list[Any]) -> None:
    # an item rewritten keeps its place in the answer (no sort); one new to the records or to the refused items is
    # sorted in: records and refused items alike, in the Query's order, as a new memo's full read gives them
    memo = NodeRecordMemo()
    items = {f"NODE#i-{s:017x}": item(s, s) for s in start}
    memo.records(sorted(items.values(), key=lambda i: i["sk"]), NOW, version="t:0", now=NOW)
    count = 0
    for step in steps:
        listed = []
        for slot, how in step:
            count += 1
            sk = f"NODE#i-{slot:017x}"
            if how is None:
                items.pop(sk, None)
            elif how == "x":
                items[sk] = {**item(slot, slot), "ready": "not a bool"}
            else:
                items[sk] = item(slot, slot, ready=how)
            listed.append((count, sk))
        answer = sorted(items.values(), key=lambda i: i["sk"])
        got = memo.patched(
            f"t:{count}", listed, NOW, lambda keys: {k: items[k] for k in keys if k in items}, len(answer)
        )
        records, refused = NodeRecordMemo().records(answer, NOW)
        assert got is not None
        assert [(r.instance_id, r.ready) for r in got[0]] == [(r.instance_id, r.ready) for r in records]
        assert [bad.sk for bad in got[1]] == [bad.sk for bad in refused]
