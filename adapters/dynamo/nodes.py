"""Membership in the table: one ``NODE#<instance-id>`` item per node, written by the agent's leader, and one
``MEMBERSHIP`` item, the leader's mark that the whole membership was confirmed.

Each ``NODE#`` item is a ``core.model.NodeRecord`` (instance id, node name, ASG, readiness, ``reported_at``) plus
``expires_at``. The agent writes it only when its content changes (and again before its TTL lapses), so
``reported_at`` alone can be old for a node that did not change; every ``MEMBERSHIP_RESYNC_SECONDS`` the agent writes
the mark::

    {"pk": "CLUSTER#<cluster>#AGENT", "sk": "MEMBERSHIP", "reported_at": "<ISO 8601 UTC>", "nodes": 2001,
     "version": "<term>:<changes>", "expires_at": <epoch seconds>,
     "changes": [{"seq": <n>, "sk": "NODE#<instance-id>"}, {"seq": <n + 1>, "sk": "NODE#<instance-id>"}, ...]}

``reported_at`` of the mark is when the agent last confirmed every ``NODE#`` item against its view of the nodes (a
list, or its watch's view since the last list: ``agent.membership_loop``; items of nodes gone deleted, changed ones
written). Readers judge a record fresh by the later of its own ``reported_at``
and the mark's (``NodeRecord.fresh`` with ``confirmed_at``), whatever TTL did. The mark's sort key does not start
with ``NODE#``, so readers of ``NODE#`` items never take it for a node.

``version`` says which ``NODE#`` records the agent has written: a term chosen when its membership reporter starts and
the number of records it has since created, changed or deleted, each counted before its call; a refresh of an unchanged
item before its TTL lapses (its ``reported_at`` and ``expires_at`` only) is not counted. The agent writes the version
after the changes it counts (in the mark at the end of a resync; ``set_membership_version`` after a change the watch
made) and only then sends the "Node Ready" reports of those changes. A reader that read the mark, then every ``NODE#``
item, and later reads the same version again may answer the records it read then (``read_membership``: the replenisher's
tick, every minute, finds the version unchanged about two times in three in the simulation, BENCHMARKS.md; the
refresher's passes keep one Query of ``MEMBERSHIP``..``NODE$``, since a pass mostly follows a change and the GetItem
first would add a call to most of them): they are the stored ones but for the times of items refreshed unchanged
meanwhile, and a record's own time matters only while the mark is not fresh (``NodeRecord.fresh``), when the agent is
not refreshing items either (an older time can only make a record count as stale sooner). What the version does not see
(a TTL deletion, a write by anything but the agent, a crash between a change and the mark) is bounded by
``node_memo.REUSE_SECONDS``, after which a reader reads the items again. A mark without a version (an agent before it)
is never reused.

``changes`` lists the agent's last ``JOURNAL_CHANGES`` changes (oldest first), each with its number in the version's
count and the sort key of the item it wrote or deleted: a reader whose Query answers every item anyway (the refresher's
pass; the replenisher's tick once the version changed, ``read_membership``) applies only those items to the answer its
memo kept at an earlier version of the same term instead of matching every item (``NodeRecordMemo.patched``; at 1,000
nodes a pass of a refresh matched a thousand items whenever one node changed, i.e. on nearly every pass, and the
replenisher a third of its ticks). The patched answer takes the Query's sort keys: an item the interruption Lambda
deleted (no version counts it) is dropped, an item another writer put is validated (before 2026-12-05 a count that
differed matched every item, and a delete with a put kept the count unseen); patching from GetItems of the listed keys
instead (tried first) kept such an item until ``REUSE_SECONDS``. The list keeps the mark within 1 KB (one write unit). A
list that does not parse (not written by this agent, or by an older one) is no list.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from adapters.dynamo.node_memo import Change, NodeRecordMemo, Refused
from adapters.dynamo.query_keys import fetch_and_listed
from adapters.dynamo.table import Attr, Table, plain
from core.exceptions import ConflictError
from core.model import NodeRecord, as_utc, to_epoch, utcnow

PREFIX = "NODE#"
MARK_SK = "MEMBERSHIP"
JOURNAL_CHANGES = 16  # the agent's last changes the mark lists (module docstring)
CHANGES = "changes"  # the mark's attribute listing them


def node_sk(instance_id: str) -> str:
    """The sort key of an instance's membership item."""
    return f"{PREFIX}{instance_id}"


def mark_time(item: dict[str, object] | None) -> datetime | None:
    """``reported_at`` of a ``MEMBERSHIP`` item, None when there is none or it is unreadable. Pure."""
    if item is None:
        return None
    try:
        return as_utc(datetime.fromisoformat(str(item["reported_at"])))
    except (KeyError, ValueError):
        return None


def mark_version(item: dict[str, object] | None) -> str | None:
    """``version`` of a ``MEMBERSHIP`` item (module docstring), None when there is none or it is not a string. Pure."""
    version = (item or {}).get("version")
    return version if isinstance(version, str) and version else None


def mark_changes(item: Mapping[str, Any] | None) -> list[Change] | None:
    """``changes`` of a ``MEMBERSHIP`` item (plain values) as ``(number, sort key)``, oldest first; None when there is
    none or any entry is not one the agent writes (an int and a ``NODE#`` key). Pure."""
    raw = (item or {}).get("changes")
    if not isinstance(raw, list):
        return None
    out: list[Change] = []
    for entry in raw:
        if not isinstance(entry, Mapping):
            return None
        seq, sk = entry.get("seq"), entry.get("sk")
        if type(seq) is not int or not isinstance(sk, str) or not sk.startswith(PREFIX):
            return None
        out.append((seq, sk))
    return out


def read_membership(
    table: Table, memo: NodeRecordMemo, now: datetime
) -> tuple[datetime | None, list[NodeRecord], list[Refused]]:
    """The mark's time, the records of the ``NODE#`` items and the items that are not records (``memo.records``):
    a consistent GetItem of the mark, then, unless ``memo`` answers for the version it carries
    (``NodeRecordMemo.reused``), a consistent Query of the ``NODE#`` items, of which only those the mark lists as
    changed since ``memo``'s answer are matched when it lists them all, the answer then taking the Query's sort keys
    (``NodeRecordMemo.patched``); else every item (``NodeRecordMemo.records``).
    The mark is read first, so a version remembered is never newer than the items read with it.

    Raises:
        StoreUnavailableError: a read failed.
    """
    # ``changes`` left as answered (``Decimal`` numbers) until a patch reads them: a tick that reuses the memo's answer
    # (most of them) reads the mark's time and version only, and the journal's 16 entries were converted every tick
    mark_item = table.get(MARK_SK, consistent=True, as_is=(CHANGES,))
    mark, version = mark_time(mark_item), mark_version(mark_item)
    reused = memo.reused(version, now)
    if reused is not None:
        return mark, *reused
    items = list(table.query_prefix(PREFIX, consistent=True, convert=False))
    fetch, listed = fetch_and_listed(items)
    changes = (
        None if mark_item is None or CHANGES not in mark_item else mark_changes({CHANGES: plain(mark_item[CHANGES])})
    )
    patched = memo.patched(version, changes, now, fetch, len(items), listed)
    if patched is not None:
        return mark, *patched
    records, refused = memo.records(items, mark, version=version, now=now)
    return mark, records, refused


class NodeItems(Table):
    """``NODE#`` items and the ``MEMBERSHIP`` mark of one cluster."""

    def put_node(self, record: NodeRecord, ttl_seconds: int) -> None:
        """Write the record (``confirmed_at`` is a reader's field, never stored); ``expires_at`` is
        ``reported_at`` + ``ttl_seconds``."""
        self.put(
            node_sk(record.instance_id),
            {
                **record.model_dump(mode="json", exclude={"confirmed_at"}),
                "expires_at": to_epoch(record.reported_at) + ttl_seconds,
            },
        )

    def delete_node(self, instance_id: str) -> None:
        self.delete(node_sk(instance_id))

    def put_membership_mark(
        self,
        confirmed_at: datetime,
        nodes: int,
        ttl_seconds: int,
        version: str | None = None,
        changes: Iterable[Change] | None = None,
    ) -> None:
        """Mark every ``NODE#`` item confirmed as of ``confirmed_at``, with the writer's ``version`` of them and its
        last ``changes`` (``(number, sort key)``, oldest first; one PutItem; shape in the module
        docstring)."""
        item: dict[str, object] = {
            "reported_at": confirmed_at.isoformat(),
            "nodes": nodes,
            "expires_at": to_epoch(confirmed_at) + ttl_seconds,
        }
        if version is not None:
            item["version"] = version
        if changes is not None:
            item["changes"] = _listed(changes)
        self.put(MARK_SK, item, as_is=("changes",))  # ints and strings: DynamoDB values already, sent as they are

    def set_membership_version(self, version: str, changes: Iterable[Change] | None = None) -> bool:
        """Set the mark's ``version`` (and ``changes``, as ``put_membership_mark``) after ``NODE#`` writes made
        between two marks (the watch's), leaving its time as it is (one UpdateItem). False, and nothing written,
        when there is no mark yet (its first resync writes one).

        Raises:
            StoreUnavailableError: the write failed.
        """
        values: dict[str, Any] = {"version": version}
        if changes is not None:
            values["changes"] = _listed(changes)
        try:
            self.update(MARK_SK, values, condition=Attr("pk").exists())
        except ConflictError:
            return False
        return True

    def membership_mark(self) -> datetime | None:
        """When the agent last confirmed the whole membership, None when it never did (or the item is unreadable)."""
        return mark_time(self.get(MARK_SK, consistent=False))

    def get_node(self, instance_id: str, max_age_seconds: float, now: datetime | None = None) -> NodeRecord | None:
        """The membership record of ``instance_id`` (confirmed by the mark), or None if absent or older than
        ``max_age_seconds`` by both its own ``reported_at`` and the mark."""
        item = self.get(node_sk(instance_id), consistent=False)
        if item is None:
            return None
        record = NodeRecord.model_validate(item).with_mark(self.membership_mark())
        return record if record.fresh(now or utcnow(), max_age_seconds) else None

    def list_nodes(self, max_age_seconds: float, now: datetime | None = None) -> list[NodeRecord]:
        """Fresh membership records, confirmed by the mark (stale ones are skipped, whatever TTL has or has not
        deleted)."""
        now = now or utcnow()
        mark = self.membership_mark()
        records = [NodeRecord.confirmed(item, mark) for item in self.query_prefix(PREFIX, convert=False)]
        return [r for r in records if r.fresh(now, max_age_seconds)]

    def recorded_nodes(self) -> list[NodeRecord]:
        """Every ``NODE#`` item as written (what the agent seeds its memory of the table from); unreadable items
        are skipped (the agent writes them again). The items are validated as the table answers them, as
        ``NodeRecordMemo.records`` does: a record has no number field (``expires_at`` and the keys are ignored), so
        converting every item's numbers first (``plain``) changes no record."""
        records = []
        for item in self.query_prefix(PREFIX, consistent=True, convert=False):
            try:
                records.append(NodeRecord.model_validate(item))
            except ValidationError:
                continue
        return records


def _listed(changes: Iterable[Change]) -> list[dict[str, Any]]:
    """``changes`` as the mark lists them (``{"seq": n, "sk": "NODE#..."}``, oldest first)."""
    return [{"seq": seq, "sk": sk} for seq, sk in changes]
