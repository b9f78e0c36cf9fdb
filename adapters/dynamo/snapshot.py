"""One read of what a refresh pass starts from: the ``LOCK`` item, the runs' pollers (``POLL#``) and the active
``RUN#`` items, then membership (the ``MEMBERSHIP`` mark and the ``NODE#`` items), in two consistent Queries.

The first kinds are in the cluster partition and their sort keys are neighbours there (``LOCK`` < ``POLL#...`` <
``RUN#...``; no other kind of that partition sorts in between), so one range read from ``LOCK`` to ``RUN$`` returns
them, with a FilterExpression dropping the runs that are over (their items are still read, and billed, by DynamoDB;
only the active ones come back). Membership is in the agent partition (``core.schema.agent_partition_of``), where
``MEMBERSHIP`` < ``NODE#...`` are neighbours too: a second range read from ``MEMBERSHIP`` to ``NODE$``. Two calls
instead of four (``LOCK`` GetItem, ``MEMBERSHIP`` GetItem, ``NODE#`` Query, ``RUN#`` GetItem); pages of 1 MB, about
4,000 nodes a page.

The ``LOCK`` item is read before the membership (the world). A reader that decides on this read and then takes the
lock conditioned on the ``LOCK`` item it saw (``LeaseLock.acquire(..., seen=..., use_seen=True)``) knows that no
other holder acted in between.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import partial
from itertools import compress
from operator import methodcaller
from typing import Any

from adapters.dynamo.node_memo import Change, NodeRecordMemo
from adapters.dynamo.nodes import MARK_SK, mark_changes, mark_time, mark_version
from adapters.dynamo.nodes import PREFIX as NODE_PREFIX
from adapters.dynamo.poller import PREFIX as POLL_PREFIX
from adapters.dynamo.query_keys import picked, sort_keys
from adapters.dynamo.runs import AS_IS as RUN_AS_IS
from adapters.dynamo.runs import PREFIX as RUN_PREFIX
from adapters.dynamo.runs import RunStore
from adapters.dynamo.table import LOCK_SK, Attr, Table, plain
from core.model import NodeRecord, fresh_by_mark, utcnow
from core.runs import Run, RunStatus

ACTIVE = [s.value for s in RunStatus if s.active]
_IS_NODE = methodcaller("startswith", NODE_PREFIX)  # of a sort key (``str``)


@dataclass(frozen=True)
class Snapshot:
    """What one read returned.

    Attributes:
        lock: the ``LOCK`` item as stored (None: never taken).
        nodes: the fresh membership records (as ``NodeItems.list_nodes``; an unreadable item is left out).
        membership_confirmed: the ``MEMBERSHIP`` mark was fresh and every ``NODE#`` item readable, so ``nodes`` is
            the agent's whole list.
        runs: the active runs (running, pausing, cancelling), oldest first.
        pollers: run id -> (the invocation polling it, when its budget ends in epoch seconds) (``POLL#``).
    """

    lock: dict[str, Any] | None = None
    nodes: list[NodeRecord] = field(default_factory=list)
    membership_confirmed: bool = False
    runs: list[Run] = field(default_factory=list)
    pollers: dict[str, tuple[str, float]] = field(default_factory=dict)

    def run(self, run_id: str | None) -> Run | None:
        """The active run ``run_id`` (None: the active one), or None when it is not active."""
        return next((r for r in self.runs if run_id is None or r.run_id == run_id), None)


def read_snapshot(
    table: Table, max_age_seconds: float, now: datetime | None = None, memo: NodeRecordMemo | None = None
) -> Snapshot:
    """Read the ``LOCK`` item, fresh membership and the active runs (module docstring): ``read_state`` then
    ``with_membership``, two Queries.

    Raises:
        StoreUnavailableError: the read failed.
    """
    return with_membership(read_state(table), table, max_age_seconds, now, memo)


def read_state(table: Table, runs: RunStore | None = None) -> Snapshot:
    """The first half of ``read_snapshot``: the ``LOCK`` item, the pollers and the active runs, in one Query (no
    membership). An event handler that must find the active run first reads it with this, then completes the same
    read with ``with_membership`` for its pass (the ``LOCK`` item still read before the world). ``runs``: the
    execution environment's store, whose last save is read back without unpacking its rows when the item answered is
    that save's (``RunStore.read``; None: every run validated from its item).

    Raises:
        StoreUnavailableError: the read failed.
    """
    keep = Attr("run_id").not_exists() | Attr("status").is_in(ACTIVE)  # every item but the runs that are over
    lock: dict[str, Any] | None = None
    active: list[Run] = []
    pollers: dict[str, tuple[str, float]] = {}
    # a run's rows read by ``Run`` as the table answered them (``adapters.dynamo.runs.AS_IS``)
    for item in table.query_range(LOCK_SK, RUN_PREFIX[:-1] + "$", consistent=True, keep=keep, as_is=RUN_AS_IS):
        sk = str(item.get("sk", ""))
        if sk == LOCK_SK:
            lock = item
        elif sk.startswith(RUN_PREFIX):
            active.append(Run.model_validate(item) if runs is None else runs.read(item))
        elif sk.startswith(POLL_PREFIX):
            pollers[sk[len(POLL_PREFIX) :]] = (str(item.get("invocation")), float(item.get("until") or 0))
    return Snapshot(lock=lock, runs=active, pollers=pollers)


def with_membership(
    state: Snapshot,
    table: Table,
    max_age_seconds: float,
    now: datetime | None = None,
    memo: NodeRecordMemo | None = None,
) -> Snapshot:
    """``state`` (from ``read_state``) with fresh membership read now (one Query; an unreadable item is left out).
    ``memo``: the records the execution environment kept from its last read (``adapters.dynamo.node_memo``; None: a
    new one, every item validated); the records carry no ``confirmed_at`` (fresh by the mark or their own time).

    The ``MEMBERSHIP`` mark sorts before the ``NODE#`` items, so the Query reads it first: when its version is the
    one ``memo`` kept a read at (``NodeRecordMemo.reused``), or a later one whose changes the mark lists
    (``NodeRecordMemo.patched``: the changed items taken from the Query's answer), that read's records (patched)
    are the answer and the other items the Query returned are not matched again (the same call either way; what
    ``read_membership`` saves in reads, this saves in CPU: matching a thousand items against the memo on every
    pass).

    Raises:
        StoreUnavailableError: the read failed.
    """
    now = now or utcnow()
    mark: datetime | None = None
    version: str | None = None
    changes: list[Change] | None = None
    # as the table answered them (validated unconverted: ``NodeRecord.confirmed``); only the mark and the NODE# items
    # are kept, both the agent partition's own kinds: none is checked for its partition (``own_kinds``)
    items = list(table.query_range(MARK_SK, NODE_PREFIX[:-1] + "$", consistent=True, convert=False, own_kinds=True))
    # the mark sorts first, so this stops at the first item; a sort key is unique in a partition
    found = next((item for item in items if str(item.get("sk", "")) == MARK_SK), None)
    if found is not None:
        read = plain(found)
        mark, version, changes = mark_time(read), mark_version(read), mark_changes(read)
    memo = NodeRecordMemo() if memo is None else memo  # (an empty memo is falsy: it has a length)
    reused = memo.reused(version, now)
    if reused is None:  # the NODE# items are looked at only now: a reused read needs none of them
        # every item's sort key read in C (``sort_keys``), and the NODE# items and their keys picked by them in C: a
        # listcomp reading each item's key was a quarter of this read's CPU at 1,000 nodes
        keys = sort_keys(items)
        nodes, listed = _nodes(items, keys)
        reused = memo.patched(version, changes, now, partial(picked, nodes, listed=listed), len(nodes), lambda: listed)
        if reused is None:  # an unreadable item: the agent writes it again
            reused = memo.records(nodes, mark, version=version, now=now)
    records, refused = reused
    if fresh_by_mark(mark, now, max_age_seconds):  # every record it confirms is fresh
        # the agent's whole list only when every item was readable: one left out is a node absent from ``nodes``
        return replace(state, nodes=records, membership_confirmed=not refused)
    fresh = [r for r in records if r.fresh(now, max_age_seconds)]  # by its own write: the mark is not fresh
    return replace(state, nodes=fresh, membership_confirmed=False)


def _nodes(items: list[dict[str, Any]], keys: list[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """The ``NODE#`` items of a membership read and their sort keys (``keys``, the items'), in the read's order.

    What a read answers: the mark, then only ``NODE#`` items. Told in C without a call a key: the keys after the mark
    joined by NUL, each separator followed by the prefix, and no NUL but the separators (a key holding one is looked at
    key by key, as is any other answer)."""
    start = 1 if keys and keys[0] == MARK_SK else 0
    rest = keys[start:]
    joined = "\0".join(rest)
    if joined.startswith(NODE_PREFIX) and joined.count("\0") == joined.count("\0" + NODE_PREFIX) == len(rest) - 1:
        return items[start:], rest
    is_node = list(map(_IS_NODE, keys))
    return list(compress(items, is_node)), list(compress(keys, is_node))
