"""The ``MEMBERSHIP`` mark's list of the agent's last changes: the refresher's pass and the replenisher's tick a few
changes behind apply only those items of their Query (``NodeRecordMemo.patched``) and answer what matching every
``NODE#`` item answers; any doubt (a gap, another term, an old full read, a list that does not parse, an item count
the changes do not explain) matches them all (moto's DynamoDB)."""

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


READERS = ["refresher", "replenisher"]


class Reader:
    """A membership read through one memo, counting the reads that matched every item (``NodeRecordMemo.records``):
    the refresher's (``with_membership``: one Query of the mark and every item) or the replenisher's
    (``read_membership``: a GetItem of the mark, then a Query of the items unless the version is the memo's)."""

    def __init__(self, store: Store, monkeypatch: pytest.MonkeyPatch, kind: str = "refresher") -> None:
        self.store, self.memo, self.full, self.kind = store, NodeRecordMemo(), 0, kind
        real = NodeRecordMemo.records

        def counted(memo: NodeRecordMemo, *args: Any, **kwargs: Any) -> Any:
            if memo is self.memo:
                self.full += 1
            return real(memo, *args, **kwargs)

        monkeypatch.setattr(NodeRecordMemo, "records", counted)

    def read(self, at: datetime) -> list[NodeRecord]:
        if self.kind == "replenisher":
            return read_membership(self.store, self.memo, at)[1]
        return with_membership(Snapshot(), self.store, 600, at, self.memo).nodes


def full_read(store: Store, at: datetime, kind: str = "refresher") -> list[NodeRecord]:
    """What ``kind``'s read answers through a new memo (every item matched)."""
    if kind == "replenisher":
        return read_membership(store, NodeRecordMemo(), at)[1]
    return with_membership(Snapshot(), store, 600, at, NodeRecordMemo()).nodes


def ids(records: list[NodeRecord]) -> list[tuple[str, bool]]:
    return [(r.instance_id, r.ready) for r in records]


@pytest.mark.parametrize("kind", READERS)
def test_a_pass_a_few_changes_behind_applies_them_without_matching_every_item(
    store: Store, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    agent = Agent(store)
    for n in range(1, 6):
        agent.put(n)
    agent.mark()
    reader = Reader(store, monkeypatch, kind)
    reader.read(NOW)
    assert reader.full == 1

    agent.put(3, ready=False)  # changed
    agent.delete(4)  # deleted
    agent.put(9)  # new: sorted in among the others
    agent.put(0)
    agent.mark()
    records = reader.read(NOW + timedelta(seconds=60))
    assert reader.full == 1  # patched
    assert ids(records) == [(f"i-{n:017x}", n != 3) for n in (0, 1, 2, 3, 5, 9)]
    assert ids(full_read(store, NOW, kind)) == ids(records)  # what a full read answers


@pytest.mark.parametrize("kind", READERS)
@pytest.mark.parametrize(
    "case",
    ["gap", "other term", "old full read", "no list", "behind the version"],
)
def test_any_doubt_matches_every_item(store: Store, monkeypatch: pytest.MonkeyPatch, case: str, kind: str) -> None:
    agent = Agent(store)
    for n in range(1, 4):
        agent.put(n)
    agent.mark()
    reader = Reader(store, monkeypatch, kind)
    reader.read(NOW)
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
    records = reader.read(later)
    assert reader.full == 2
    assert ids(records) == ids(full_read(store, NOW, kind))


@pytest.mark.parametrize("kind", READERS)
def test_a_changed_item_that_does_not_validate_is_left_out_as_a_full_read_leaves_it(
    store: Store, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    agent = Agent(store)
    agent.put(1)
    agent.put(2)
    agent.mark()
    reader = Reader(store, monkeypatch, kind)
    reader.read(NOW)
    agent.count += 1
    bad = {"instance_id": f"i-{2:017x}", "node_name": "n2", "ready": "perhaps", "reported_at": NOW.isoformat()}
    store.put(node_sk(f"i-{2:017x}"), bad)
    agent.changes.append((agent.count, node_sk(f"i-{2:017x}")))
    agent.mark()
    assert [r.instance_id for r in reader.read(NOW)] == [f"i-{1:017x}"]
    assert reader.full == 1


def test_a_version_far_ahead_is_no_patch_and_costs_nothing(store: Store) -> None:
    """A mark whose count is far ahead of the memo's (corrupt, forged) is told apart by the list's length, not by
    spelling out every number in between (found by review: 10**15 exhausted the memory)."""
    agent = Agent(store)
    agent.put(1)
    agent.mark()
    memo = NodeRecordMemo()
    with_membership(Snapshot(), store, 600, NOW, memo)
    fetched: list[list[str]] = []
    far = memo.patched(f"t:{10**15}", [(2, node_sk(f"i-{1:017x}"))], NOW, lambda keys: fetched.append(keys) or {})
    assert far is None and fetched == []


def test_the_replenishers_tick_sees_an_item_the_interruption_lambda_deleted_at_the_next_change(store: Store) -> None:
    """The tick reads the items only when the version moved; then one Query of all of them, patched only when the
    patched answer has as many items (never from GetItems of the listed keys): an item the interruption Lambda deleted
    is gone at the next change, as with a full read."""
    agent = Agent(store)
    for n in range(1, 4):
        agent.put(n)
    agent.mark()
    memo = NodeRecordMemo()
    read_membership(store, memo, NOW)
    store.delete_node(f"i-{3:017x}")
    agent.put(1, ready=False)
    agent.mark()
    _, records, _ = read_membership(store, memo, NOW + timedelta(seconds=60))
    assert ids(records) == [(f"i-{1:017x}", False), (f"i-{2:017x}", True)]


def test_the_replenishers_tick_matches_only_the_listed_items_of_its_query(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A version a few changes on: one Query of every item (as before), of which only the listed ones are validated
    again; an item rewritten by something that counts no version, at the same size, keeps its old record until a full
    read (``REUSE_SECONDS`` after the last one), as in the refresher's pass."""
    agent = Agent(store)
    for n in range(1, 4):
        agent.put(n)
    agent.mark()
    reader = Reader(store, monkeypatch, "replenisher")
    reader.read(NOW)
    queries: list[str] = []
    real_query = Store.query_prefix
    monkeypatch.setattr(
        Store, "query_prefix", lambda self, prefix, *a, **k: queries.append(prefix) or real_query(self, prefix, *a, **k)
    )
    validated: list[str] = []
    real_validate = NodeRecord.model_validate
    monkeypatch.setattr(
        NodeRecord,
        "model_validate",
        classmethod(lambda cls, item, *a, **k: validated.append(item["instance_id"]) or real_validate(item, *a, **k)),
    )
    store.put_node(NodeRecord(instance_id=f"i-{3:017x}", node_name="n3", ready=False, reported_at=NOW), 86400)
    agent.put(2, ready=False)  # listed: the agent's change
    agent.mark()
    records = reader.read(NOW + timedelta(seconds=60))
    assert queries == ["NODE#"] and reader.full == 1 and validated == [f"i-{2:017x}"]
    assert ids(records) == [(f"i-{n:017x}", n != 2) for n in (1, 2, 3)]  # i-3 as read before: not listed
    later = reader.read(NOW + timedelta(seconds=REUSE_SECONDS))  # the same version, but the last full read too old
    assert reader.full == 2 and ids(later) == [(f"i-{n:017x}", n == 1) for n in (1, 2, 3)]


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


@pytest.mark.parametrize("kind", READERS)
@pytest.mark.parametrize("case", ["deleted by another", "put by another", "both", "put unreadable by another"])
def test_items_no_version_counts_are_taken_from_the_reads_keys(
    store: Store, monkeypatch: pytest.MonkeyPatch, case: str, kind: str
) -> None:
    """An item deleted or put by anything but the agent (the interruption Lambda forgets a node) changes the Query's
    size, not the version: the patched answer takes the Query's keys (drops the record gone, validates the item new)
    and answers what a full read answers, without matching every item."""
    agent = Agent(store)
    for n in range(1, 5):
        agent.put(n)
    agent.mark()
    reader = Reader(store, monkeypatch, kind)
    reader.memo.by_instance(reader.read(NOW))  # the map by instance id made, so the patch changes it (``_rekeyed``)
    if case in ("deleted by another", "both"):
        store.delete_node(f"i-{3:017x}")
    if case in ("put by another", "both"):
        store.put_node(NodeRecord(instance_id=f"i-{7:017x}", node_name="n7", reported_at=NOW), 86400)
    if case == "put unreadable by another":
        store.put(node_sk(f"i-{8:017x}"), {"instance_id": f"i-{8:017x}", "ready": "not a bool"})
    agent.put(2, ready=False)
    agent.mark()
    records = reader.read(NOW + timedelta(seconds=60))
    assert reader.full == 1
    assert ids(records) == ids(full_read(store, NOW, kind))
    if kind == "replenisher":  # its records are the memo's answer itself
        assert reader.memo.by_instance(records) == {r.instance_id: r for r in records}
    assert ids(reader.read(NOW + timedelta(seconds=REUSE_SECONDS))) == ids(records)  # the next full read agrees
    assert reader.full == 2


@pytest.mark.parametrize("kind", READERS)
@pytest.mark.parametrize("seed", range(6))
def test_patched_answers_are_full_reads_answers(
    store: Store, monkeypatch: pytest.MonkeyPatch, seed: int, kind: str
) -> None:
    """Random changes between reads, read through one memo (patched when it can) and by a new one (full)."""
    rand = random.Random(seed)
    agent = Agent(store)
    for n in range(8):
        agent.put(n)
    agent.mark()
    reader = Reader(store, monkeypatch, kind)
    at = NOW
    others: list[int] = []
    for _ in range(30):
        changes = rand.choice([0, 1, 1, 2, 3, 20])
        for _ in range(changes):
            n = rand.randrange(12)
            agent.delete(n) if rand.random() < 0.2 else agent.put(n, ready=rand.random() < 0.5)
        if changes and rand.random() < 0.3:  # another writer, counted by no version: the interruption Lambda's delete
            # or a put of a new key, with a change of the agent's (without one the version is the same and the read
            # reused, as documented: until a full read), never a same-key rewrite (likewise)
            if rand.random() < 0.5:
                store.delete_node(f"i-{rand.randrange(12 + len(others)):017x}")
            else:
                others.append(12 + len(others))
                store.put_node(NodeRecord(instance_id=f"i-{others[-1]:017x}", node_name="n", reported_at=at), 86400)
        agent.mark()
        at += timedelta(seconds=rand.choice([30, 120, 300]))
        assert ids(reader.read(at)) == ids(full_read(store, at, kind))
    assert reader.full < 20  # most reads patched (or reused)


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
