"""Review (review-b) of fcddfaf: a patched membership answer must be what a full read of the ``NODE#`` items answers
at that moment (but for ``reported_at`` of items refreshed unchanged), and any doubt must read the items.

The marks are written with ``Store.put`` so that these tests run against the commit before fcddfaf too (there,
every version change reads every item, and the first three tests below pass). An old leader's write under another
term between two reads is the exception both readers share with reuse, bounded by ``REUSE_SECONDS`` (the last two
tests: the replenisher's tick patches from its Query as the refresher's pass does)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from adapters.dynamo.node_memo import REUSE_SECONDS, NodeRecordMemo
from adapters.dynamo.nodes import MARK_SK, node_sk, read_membership
from adapters.dynamo.snapshot import Snapshot, with_membership
from adapters.dynamo.store import Store
from core.model import NodeRecord

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
LATER = NOW + timedelta(seconds=60)


def iid(n: int) -> str:
    return f"i-{n:017x}"


def put(store: Store, n: int, ready: bool = True) -> None:
    store.put_node(NodeRecord(instance_id=iid(n), node_name=f"n{n}", ready=ready, reported_at=NOW), 86400)


def mark(store: Store, version: str, changes: list[tuple[int, str]]) -> None:
    store.put(
        MARK_SK,
        {
            "reported_at": NOW.isoformat(),
            "nodes": 3,
            "expires_at": int(NOW.timestamp()) + 86400,
            "version": version,
            "changes": [{"seq": seq, "sk": sk} for seq, sk in changes],
        },
    )


def ids(records: list[NodeRecord]) -> list[tuple[str, bool]]:
    return [(r.instance_id, r.ready) for r in records]


def setup(store: Store) -> NodeRecordMemo:
    """Three nodes written by the agent of term ``t`` (3 changes), read in full by a reader's memo."""
    for n in (1, 2, 3):
        put(store, n)
    mark(store, "t:3", [(n, node_sk(iid(n))) for n in (1, 2, 3)])
    memo = NodeRecordMemo()
    read_membership(store, memo, NOW)
    return memo


def test_a_forged_version_far_ahead_of_the_memo_reads_the_items_instead_of_exhausting_memory(store: Store) -> None:
    """``patched`` builds ``list(range(k + 1, n + 1))`` before comparing it with the listed changes: a mark whose
    version's count is far ahead (corrupt, forged) raises MemoryError (at 10**15; at 3 * 10**7 it takes seconds and
    about a gigabyte) out of ``read_membership`` / ``with_membership`` on every tick, where a full read answers."""
    memo = setup(store)
    put(store, 2, ready=False)
    mark(store, f"t:{10**15}", [(4, node_sk(iid(2)))])
    _, records, _ = read_membership(store, memo, LATER)  # MemoryError
    assert ids(records) == ids(read_membership(store, NodeRecordMemo(), LATER)[1])


def test_an_item_the_interruption_lambda_deleted_is_gone_once_the_version_changes(store: Store) -> None:
    """The interruption Lambda's ``ForgetNode`` (``lambdas/interruption/execute.py``: ``store.delete_node``) changes
    no version. Before fcddfaf the next change of any node (a new version) made the reader read every item, so the
    deletion was seen; a patched answer keeps the deleted record until ``REUSE_SECONDS`` after the last full read,
    although a full read at that moment (in the refresher: the very Query it holds) has no such item."""
    memo = setup(store)
    store.delete_node(iid(3))  # the interruption Lambda: the node is going
    put(store, 1, ready=False)  # the agent: another node changed
    mark(store, "t:4", [(n, node_sk(iid(n))) for n in (1, 2, 3)] + [(4, node_sk(iid(1)))])
    _, records, _ = read_membership(store, memo, LATER)
    full = read_membership(store, NodeRecordMemo(), LATER)[1]
    assert ids(full) == [(iid(1), False), (iid(2), True)]
    assert ids(records) == ids(full)  # patched: i-3 still there


def test_the_refreshers_patched_pass_keeps_an_item_its_own_query_did_not_return(store: Store) -> None:
    for n in (1, 2, 3):
        put(store, n)
    mark(store, "t:3", [(n, node_sk(iid(n))) for n in (1, 2, 3)])
    memo = NodeRecordMemo()
    with_membership(Snapshot(), store, 600, NOW, memo)
    store.delete_node(iid(3))  # the interruption Lambda
    put(store, 1, ready=False)
    mark(store, "t:4", [(4, node_sk(iid(1)))])
    nodes = with_membership(Snapshot(), store, 600, LATER, memo).nodes
    assert ids(nodes) == ids(with_membership(Snapshot(), store, 600, LATER, NodeRecordMemo()).nodes)


def test_an_old_leaders_write_between_two_versions_of_the_new_leaders_term_is_read_within_reuse_seconds(
    store: Store,
) -> None:
    """Two agents: the new leader (term ``t``) publishes ``t:3``; the old one (term ``s``), still writing, changes
    node 3 and sets the mark's version to its own ``s:9``; the new leader then changes node 1 and sets ``t:4``.
    The mark went through another term between the reader's two reads: before fcddfaf any version change read
    every item; a patched read (the refresher's pass; the replenisher's tick since it patches from its own Query)
    takes ``t:3`` -> ``t:4`` as the new leader's changes only and misses the old leader's write, as a reused read
    misses the same write when the new leader's next mark says ``t:3`` again (the next test). Both are bounded by
    ``REUSE_SECONDS`` after the last full read, where every item is matched."""
    memo = setup(store)
    put(store, 3, ready=False)  # the old leader
    mark(store, "s:9", [(9, node_sk(iid(3)))])
    put(store, 1, ready=False)  # the new leader
    mark(store, "t:4", [(n, node_sk(iid(n))) for n in (1, 2, 3)] + [(4, node_sk(iid(1)))])
    full = read_membership(store, NodeRecordMemo(), LATER)[1]
    assert ids(full) == [(iid(1), False), (iid(2), True), (iid(3), False)]
    _, records, _ = read_membership(store, memo, LATER)
    assert ids(records) == [(iid(1), False), (iid(2), True), (iid(3), True)]  # patched: i-3 as read before
    _, records, _ = read_membership(store, memo, NOW + timedelta(seconds=REUSE_SECONDS))
    assert ids(records) == ids(full)


def test_an_old_leaders_write_between_two_reads_of_one_version_is_read_within_reuse_seconds(store: Store) -> None:
    """What reuse always missed (before the mark listed changes too): the old leader's write between two reads that
    both find the new leader's ``t:3``, until ``REUSE_SECONDS`` after the full read."""
    memo = setup(store)
    put(store, 3, ready=False)  # the old leader
    mark(store, "s:9", [(9, node_sk(iid(3)))])
    mark(store, "t:3", [(n, node_sk(iid(n))) for n in (1, 2, 3)])  # the new leader's resync: nothing of its own
    _, records, _ = read_membership(store, memo, LATER)
    assert ids(records) == [(iid(1), True), (iid(2), True), (iid(3), True)]  # reused
    _, records, _ = read_membership(store, memo, NOW + timedelta(seconds=REUSE_SECONDS))
    assert ids(records) == [(iid(1), True), (iid(2), True), (iid(3), False)]
