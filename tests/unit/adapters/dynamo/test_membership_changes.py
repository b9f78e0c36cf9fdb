"""The ``MEMBERSHIP`` mark's list of the agent's last changes: a reader a few changes behind reads only those items
(``NodeRecordMemo.patched``) and answers what a full read of the ``NODE#`` items answers; any doubt (a gap, another
term, an old full read, a list that does not parse) reads them all (moto's DynamoDB)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from adapters.dynamo.node_memo import REUSE_SECONDS, NodeRecordMemo
from adapters.dynamo.nodes import JOURNAL_CHANGES, mark_changes, node_sk, read_membership
from adapters.dynamo.snapshot import Snapshot, with_membership
from adapters.dynamo.store import Store
from core.model import NodeRecord

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


class Agent:
    """Writes ``NODE#`` items and the mark as the membership reporter does: each change counted and listed."""

    def __init__(self, store: Store, term: str = "t") -> None:
        self.store, self.term, self.count = store, term, 0
        self.changes: list[tuple[int, str]] = []

    def put(self, n: int, ready: bool = True, at: datetime = NOW) -> None:
        record = NodeRecord(instance_id=f"i-{n:017x}", node_name=f"n{n}", ready=ready, reported_at=at)
        self.count += 1
        self.changes.append((self.count, node_sk(record.instance_id)))
        self.store.put_node(record, 86400)

    def delete(self, n: int) -> None:
        self.count += 1
        self.changes.append((self.count, node_sk(f"i-{n:017x}")))
        self.store.delete_node(f"i-{n:017x}")

    def mark(self, at: datetime = NOW, listed: int = JOURNAL_CHANGES) -> None:
        self.store.put_membership_mark(
            at, 0, 86400, version=f"{self.term}:{self.count}", changes=self.changes[-listed:] if listed else None
        )


class CountingQueries:
    def __init__(self, real: Any) -> None:
        self.real, self.queries, self.gets = real, 0, 0

    def query(self, **kwargs: Any) -> Any:
        self.queries += 1
        return self.real.query(**kwargs)

    def get_item(self, **kwargs: Any) -> Any:
        self.gets += 1
        return self.real.get_item(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def counted(store: Store) -> tuple[Store, CountingQueries]:
    table = CountingQueries(store.table)
    return Store(table, store.cluster), table


def ids(records: list[NodeRecord]) -> list[tuple[str, bool]]:
    return [(r.instance_id, r.ready) for r in records]


def test_a_reader_a_few_changes_behind_applies_them_without_reading_the_items(store: Store) -> None:
    agent = Agent(store)
    for n in range(1, 6):
        agent.put(n)
    agent.mark()
    reader, table = counted(store)
    memo = NodeRecordMemo()
    read_membership(reader, memo, NOW)
    assert table.queries == 1

    agent.put(3, ready=False)  # changed
    agent.delete(4)  # deleted
    agent.put(9)  # new: sorted in among the others
    agent.put(0)
    agent.mark()
    table.gets = 0
    _, records, refused = read_membership(reader, memo, NOW + timedelta(seconds=60))
    assert table.queries == 1  # no Query: the mark's GetItem, then one for each item changed
    assert table.gets == 1 + 4
    assert ids(records) == [(f"i-{n:017x}", n != 3) for n in (0, 1, 2, 3, 5, 9)]
    assert refused == []
    assert ids(read_membership(store, NodeRecordMemo(), NOW)[1]) == ids(records)  # what a full read answers


@pytest.mark.parametrize(
    "case",
    ["gap", "other term", "old full read", "no list", "behind the version"],
)
def test_any_doubt_reads_the_items(store: Store, case: str) -> None:
    agent = Agent(store)
    for n in range(1, 4):
        agent.put(n)
    agent.mark()
    reader, table = counted(store)
    memo = NodeRecordMemo()
    read_membership(reader, memo, NOW)
    later = NOW + timedelta(seconds=60)
    if case == "gap":  # more changes than the mark lists
        for _ in range(JOURNAL_CHANGES + 1):
            agent.put(2, ready=False)
    elif case == "other term":  # a new reporter counts from 0 again
        agent.term = "u"
        agent.put(2, ready=False)
    elif case == "old full read":
        agent.put(2, ready=False)
        later = NOW + timedelta(seconds=REUSE_SECONDS)
    elif case == "no list":  # an agent that lists no changes
        agent.put(2, ready=False)
        agent.mark(listed=0)
    else:  # the list ends before the version it claims
        agent.put(2, ready=False)
        agent.changes.pop()
    if case != "no list":
        agent.mark()
    _, records, _ = read_membership(reader, memo, later)
    assert table.queries == 2
    assert ids(records) == ids(read_membership(store, NodeRecordMemo(), NOW)[1])


def test_a_changed_item_that_does_not_validate_is_refused_as_a_full_read_refuses_it(store: Store) -> None:
    agent = Agent(store)
    agent.put(1)
    agent.put(2)
    agent.mark()
    memo = NodeRecordMemo()
    read_membership(store, memo, NOW)
    agent.count += 1
    bad = {"instance_id": f"i-{2:017x}", "node_name": "n2", "ready": "perhaps", "reported_at": NOW.isoformat()}
    store.put(node_sk(f"i-{2:017x}"), bad)  # written by something else than the agent, listed by the agent
    agent.changes.append((agent.count, node_sk(f"i-{2:017x}")))
    agent.mark()
    _, records, refused = read_membership(store, memo, NOW)
    assert [r.instance_id for r in records] == [f"i-{1:017x}"]
    assert [r.sk for r in refused] == [node_sk(f"i-{2:017x}")]


@pytest.mark.parametrize(
    "changes",
    [
        "not a list",
        [["1", "NODE#i-1"]],
        [{"seq": "1", "sk": "NODE#i-1"}],
        [{"seq": True, "sk": "NODE#i-1"}],
        [{"seq": 1, "sk": "CMD#x"}],
        [{"seq": 1}],
    ],
)
def test_a_list_the_agent_does_not_write_is_no_list(changes: Any) -> None:
    assert mark_changes({"changes": changes}) is None
    assert mark_changes({"changes": [{"seq": 1, "sk": "NODE#i-1"}]}) == [(1, "NODE#i-1")]


@pytest.mark.parametrize("seed", range(6))
def test_patched_answers_are_full_reads_answers(store: Store, seed: int) -> None:
    """Random changes between reads, read through one memo (patched when it can) and by a new one (full)."""
    rand = random.Random(seed)
    agent = Agent(store)
    for n in range(8):
        agent.put(n)
    agent.mark()
    memo = NodeRecordMemo()
    reader, table = counted(store)
    at = NOW
    for _ in range(30):
        for _ in range(rand.choice([0, 1, 1, 2, 3, 20])):
            n = rand.randrange(12)
            agent.delete(n) if rand.random() < 0.2 else agent.put(n, ready=rand.random() < 0.5)
        agent.mark()
        at += timedelta(seconds=rand.choice([30, 120, 300]))
        _, records, refused = read_membership(reader, memo, at)
        full = read_membership(store, NodeRecordMemo(), at)
        assert ids(records) == ids(full[1]) and refused == full[2]
    assert table.queries < 30  # most reads patched (or reused)


def test_the_refreshers_read_takes_the_changed_items_from_its_query(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``with_membership`` (one Query of the mark and every item, as before) applies the listed changes with the
    items the Query answered, matching no other item against the memo."""
    agent = Agent(store)
    for n in range(1, 6):
        agent.put(n)
    agent.mark()
    memo = NodeRecordMemo()
    with_membership(Snapshot(), store, 600, NOW, memo)
    agent.put(2, ready=False)
    agent.delete(5)
    agent.mark()
    matched: list[int] = []
    real = NodeRecordMemo.records
    monkeypatch.setattr(
        NodeRecordMemo, "records", lambda self, items, *a, **k: matched.append(1) or real(self, items, *a, **k)
    )
    patched = with_membership(Snapshot(), store, 600, NOW + timedelta(seconds=60), memo).nodes
    assert matched == []
    assert ids(patched) == [(f"i-{n:017x}", n != 2) for n in (1, 2, 3, 4)]
