"""``snapshot.with_membership`` reads its Query with ``own_kinds`` (no item checked for its partition) and looks at the
``NODE#`` items only when the memo's last read is not reused: it answers exactly what the general path answers (a
Query whose every item is checked, then one loop over the items), on the simulated DynamoDB, whatever other items sit
in the range, for a sequence of reads sharing a memo (reused, patched and full reads alike)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.dynamo.node_memo import NodeRecordMemo
from adapters.dynamo.nodes import MARK_SK, mark_changes, mark_time, mark_version, node_sk
from adapters.dynamo.nodes import PREFIX as NODE_PREFIX
from adapters.dynamo.query_keys import picked, sort_keys
from adapters.dynamo.snapshot import Snapshot, with_membership
from adapters.dynamo.store import Store
from adapters.dynamo.table import Table, plain
from core.model import fresh_by_mark
from sim.dynamo import MemoryDynamo
from sim.faults import Faults
from sim.kernel import Kernel

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
# sort keys in the agent partition's range MEMBERSHIP..NODE$ that are neither the mark nor a NODE# item
OTHERS = ("MEMBERSHIP#x", "MEMBERSHIPS", "N", "NA#1", "NODE", "NODE$", "NOD")


def general(state: Snapshot, table: Table, max_age: float, now: datetime, memo: NodeRecordMemo) -> Snapshot:
    """``with_membership`` as it was: every item checked for its partition, one loop keeping the mark and NODE#."""
    mark: datetime | None = None
    version: str | None = None
    changes: list[tuple[int, str]] | None = None
    nodes: list[dict[str, Any]] = []
    for item in table.query_range(MARK_SK, NODE_PREFIX[:-1] + "$", consistent=True, convert=False):
        sk = str(item.get("sk", ""))
        if sk == MARK_SK:
            read = plain(item)
            mark, version, changes = mark_time(read), mark_version(read), mark_changes(read)
        elif sk.startswith(NODE_PREFIX):
            nodes.append(item)
    reused = memo.reused(version, now) or memo.patched(
        version, changes, now, lambda keys: picked(nodes, keys), len(nodes), lambda: sort_keys(nodes)
    )
    records = reused[0] if reused is not None else memo.records(nodes, mark, version=version, now=now)[0]
    if fresh_by_mark(mark, now, max_age):
        return Snapshot(nodes=records)
    return Snapshot(nodes=[r for r in records if r.fresh(now, max_age)])


def node_item(n: int, ready: bool | str, age: int) -> dict[str, Any]:
    reported = (NOW - timedelta(seconds=age)).isoformat()
    return {"instance_id": f"i-{n:017x}", "node_name": f"n{n}", "reported_at": reported, "ready": ready}  # "x": refused


write = st.one_of(
    st.tuples(st.just("node"), st.integers(0, 5), st.sampled_from([True, False, "x"]), st.sampled_from([0, 900])),
    st.tuples(st.just("gone"), st.integers(0, 5)),
    st.tuples(st.just("other"), st.sampled_from(OTHERS)),
    st.tuples(st.just("foreign"), st.integers(0, 5)),  # a NODE# sort key in the cluster partition: never read
    st.tuples(st.just("mark"), st.integers(0, 4), st.booleans()),
)


@settings(max_examples=150, deadline=None)
@given(rounds=st.lists(st.tuples(st.lists(write, max_size=5), st.integers(0, 700)), min_size=1, max_size=5))
def test_own_kinds_read_answers_as_the_general_path(rounds: list[tuple[list[tuple[Any, ...]], int]]) -> None:
    kernel = Kernel(seed=1)
    raw = MemoryDynamo(kernel, Faults(kernel), copy_reads=False).table("state")
    store = Store(raw, "demo")
    fast, slow = NodeRecordMemo(), NodeRecordMemo()
    count, changes = 0, list[tuple[int, str]]()
    now = NOW
    for writes, seconds in rounds:
        for kind, *args in writes:
            if kind == "node":
                n, ready, age = args
                store.put(node_sk(f"i-{n:017x}"), node_item(n, ready, age))
                count += 1
                changes = [*changes[-3:], (count, node_sk(f"i-{n:017x}"))]
            elif kind == "gone":
                store.delete(node_sk(f"i-{args[0]:017x}"))
            elif kind == "other":
                raw.put_item(Item={**node_item(9, True, 0), "pk": store.agent_pk, "sk": args[0]})  # a record's fields
            elif kind == "foreign":
                store.put(f"COMP#{args[0]}", {"x": 1})
                raw.put_item(Item={**node_item(8, True, 0), "pk": store.pk, "sk": node_sk(f"i-{args[0]:017x}")})
            else:
                skew, versioned = args
                version = f"t:{count + skew - 2}" if versioned else None
                store.put_membership_mark(now - timedelta(seconds=300 * skew), 1, 600, version, changes)
        now += timedelta(seconds=seconds)
        before = dict(raw.dynamo.calls)
        got = with_membership(Snapshot(), store, 600, now, fast).nodes
        between = dict(raw.dynamo.calls)
        assert got == general(Snapshot(), store, 600, now, slow).nodes
        assert between == {**before, "Query": before.get("Query", 0) + 1}  # one Query each, nothing else
        assert raw.dynamo.calls == {**between, "Query": between["Query"] + 1}
