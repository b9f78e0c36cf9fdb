"""Validated membership records kept by an execution environment between reads of the whole membership.

A reader of every ``NODE#`` item on every invocation (the replenisher's tick every 2 minutes, the refresher's pass)
validated each item into a ``core.model.NodeRecord`` every time, although the agent rewrites an item only when its
node changes (``adapters.dynamo.nodes``): at 1,000 nodes that was most of a tick's CPU. ``NodeRecordMemo`` keeps the
record of each item it validated, with a private copy of what the validation read, and answers the next read of an
item with exactly those values with that record instead of validating it again.

What the validation reads is the values of the record's own fields (``FIELDS``): ``NodeRecord`` ignores every other
attribute (``extra="ignore"``: ``pk``, ``sk``, ``expires_at``), has no aliases and no model validators (a test holds
it to that). "Exactly those values": each field present or absent alike, its value equal by ``==`` *and* of the same
type, all the way into nested lists and maps, and numbers other than ints of the same text (``repr``), since Python's
``==`` alone holds ``True == 1 == 1.0 == Decimal("1.0")`` and pydantic reads ``reported_at: 1`` as a time but refuses
``reported_at: True``; a field holding a value of any other type (a set, a binary value) is validated on every read.
So an item whose record could differ in any way (rewritten by the agent, forged, only retyped) is validated again,
and an item that does not validate is refused on every read (it is never remembered).

Bounded: each read keeps only the items it was given (the current membership), none of an earlier read's; a
patched answer (below) keeps the items it applied in their place, so the next full read matches them too.

A read that comes with the ``MEMBERSHIP`` mark's ``version`` (``adapters.dynamo.nodes.read_membership``, the
replenisher's; ``adapters.dynamo.snapshot.with_membership``, the refresher's) is kept whole with it: the next read
that finds the same version within ``REUSE_SECONDS`` of it is answered with the same lists, without the ``NODE#``
items (``reused``). The agent changes the version with every record it creates, changes
or deletes, so that read would have returned the same records but for the times of items it refreshed unchanged
(why that is safe: ``adapters.dynamo.nodes``); ``REUSE_SECONDS`` bounds what the version does not see (a TTL
deletion, a write by anything but the agent, a crash between a change and the mark).

A read whose version is a later one of the same term can often do without matching every ``NODE#`` item too: the mark
lists the agent's last changes (``adapters.dynamo.nodes``, ``changes``: each change's number and the sort key of the
item it wrote or deleted). When they cover every change since the version the memo's answer is at, ``patched`` takes
only those items from the caller's read (``fetch``, ``adapters.dynamo.query_keys.picked``: the refresher's pass and the
replenisher's tick read every item in the Query they make anyway) and applies them to that answer: each one's record
validated in place of its old one, an item gone dropped, the rest shared. An answer whose sort keys are not the read's
(an item deleted or put by anything but the agent, which no version counts: the interruption Lambda forgets the record
of an instance going away) takes the read's: a record whose item the read has not is dropped, an item the answer has
not is validated (``listed``; without it, no answer: every item is matched). That is the answer a full read would give
but for the times of items refreshed unchanged meanwhile and the content of items rewritten by others at the same key
(an old leader's write under its own term between two reads), as for ``reused``, bounded the same way: ``REUSE_SECONDS``
counts from the last full read, patched or not (so a reader whose version did not change re-reads every item
``REUSE_SECONDS`` after the last full read, not after the last patch).

The memo lives in the reader's ``Deps`` (one per execution environment, like ``hooks_seen``); a warm Lambda keeps
it, a cold start begins empty. Pure: no I/O; times are the caller's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from operator import itemgetter
from typing import Any

from pydantic import ValidationError

from core.model import NodeRecord

CONFIRMED_AT = "confirmed_at"  # a reader's field of ``NodeRecord`` (the mark's time), never stored by the agent
FIELDS = tuple(name for name in NodeRecord.model_fields if name != CONFIRMED_AT)  # what a validation reads
# one of the agent's changes as the mark lists it: its number in the version's count, the sort key of the item
Change = tuple[int, str]
# the items of some sort keys, read now (a key absent from the answer, or None: no such item)
Fetch = Callable[[list[str]], Mapping[str, Mapping[str, Any] | None]]
_ABSENT = object()  # a field the item does not have (not the same as one holding None: ``ready: None`` is refused)
_ABSENTS = (_ABSENT,) * len(FIELDS)
# an item's ``FIELDS`` read at once in C, when it has every one (the agent writes every field: ``put_node``); an item
# without one raises ``KeyError`` and is read by ``item.get`` (``_ABSENT`` where it has none): the same tuple either way
_VALUES = itemgetter(*FIELDS)
# types whose equal values of the same type are the same value (floats and Decimals are also compared by ``repr``:
# ``Decimal("1.0") == Decimal("1")``, ``0.0 == -0.0``)
_EXACT_BY_EQUALITY = frozenset({str, bool, int, type(None), bytes, object})
_BY_TEXT = frozenset({float, Decimal})
# the longest a read is answered again from its version (seconds): past it the items are read whatever the version
# says. Five replenisher ticks (``infra.replenisher.DEFAULT_TICK_MINUTES``); the agent's resync writes the mark
# every ``MEMBERSHIP_RESYNC_SECONDS`` (60 s).
REUSE_SECONDS = 600.0


@dataclass(frozen=True)
class Refused:
    """A ``NODE#`` item that is not a record: its sort key (``""`` when it has none) and pydantic's error."""

    sk: str
    error: ValidationError


@dataclass(frozen=True)
class _Entry:
    values: tuple[Any, ...]  # the item's ``FIELDS`` (``_ABSENT`` where it had none), containers copied
    types: tuple[type, ...]
    deep: tuple[int, ...]  # the positions whose values equality and type alone do not pin down
    # of those, each one holding a list of values of ``_EXACT_BY_EQUALITY`` types (``roles``): its elements' types,
    # compared at once (the list equal, its elements of those types: the same list); None: looked at value by value
    flat: tuple[tuple[int, tuple[type, ...]], ...] | None
    # the one such list when it is the only deep value (a record's ``roles``): judged inline, not by ``_same_deep``
    single: tuple[int, tuple[type, ...]] | None
    record: NodeRecord
    instance_id: str  # ``record.instance_id``, read here without the record (a cold object in a full match)


class NodeRecordMemo:
    """``NODE#`` item -> its validated ``NodeRecord``, for the items of the last read (module docstring)."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}
        # the last read's answer, the mark's version read before it and when it was read; None: not to be reused
        self._last: tuple[list[NodeRecord], list[Refused]] | None = None
        self._version: str | None = None
        self._read_at: datetime | None = None  # the last full read's (``patched`` keeps it)
        # the last answer by sort key, in the Query's order (``patched`` changes copies of them)
        self._by_sk: dict[str, NodeRecord] = {}
        self._refused_by_sk: dict[str, Refused] = {}
        # the last answer's records by instance id (``by_instance``), once asked; None: not made (or not patchable)
        self._keyed: dict[str, NodeRecord] | None = None

    def reused(self, version: str | None, now: datetime) -> tuple[list[NodeRecord], list[Refused]] | None:
        """The last read's records and refused items when it carried ``version`` (not None) and was made less than
        ``REUSE_SECONDS`` before ``now`` (aware); None otherwise: read the items. The lists are shared: never change
        them."""
        if version is None or self._last is None or version != self._version or self._read_at is None:
            return None
        if not 0 <= (now - self._read_at).total_seconds() < REUSE_SECONDS:
            return None
        return self._last

    def patched(
        self,
        version: str | None,
        changes: Sequence[Change] | None,
        now: datetime,
        fetch: Fetch,
        expected: int | None = None,
        listed: Callable[[], Sequence[str]] | None = None,
    ) -> tuple[list[NodeRecord], list[Refused]] | None:
        """The last answer with the items the agent changed since read by ``fetch`` and applied (module docstring),
        when ``version`` is a later one of the same term as the answer's, ``changes`` (the mark's,
        ``adapters.dynamo.nodes.mark_changes``) hold every change number after the answer's up to ``version``'s, in
        order, and the last full read was less than ``REUSE_SECONDS`` before ``now``; None otherwise (nothing
        fetched): read every item. A changed item that does not validate is refused as a full read would refuse it.
        ``expected``: how many items the caller's read found (a Query's answer, fetched from); ``listed``: their sort
        keys, in the read's order, compared with the patched answer's on every patch: where they differ (an item another
        writer deleted or put, which no version counts) the answer takes the read's (module docstring); without
        ``listed``, a patched answer of another size than ``expected`` is no answer either. The
        lists are shared: never change them.

        Raises what ``fetch`` raises (``StoreUnavailableError``).
        """
        last, read_at = self._last, self._read_at
        if version is None or changes is None or last is None or read_at is None or self._version is None:
            return None
        if not 0 <= (now - read_at).total_seconds() < REUSE_SECONDS:
            return None
        span = _span(self._version, version)
        if span is None:
            return None
        todo = [change for change in changes if change[0] > span[0]]
        if len(todo) != span[1] - span[0] or any(seq != span[0] + at for at, (seq, _) in enumerate(todo, 1)):
            return None  # a change the mark no longer lists (or lists twice, or a count far ahead): read the items
        keys = list(dict.fromkeys(sk for _, sk in todo))
        found = fetch(keys)
        if any(CONFIRMED_AT in item for item in found.values() if item is not None):
            return None  # an item the agent never writes: as a full read, nothing kept
        before, keyed, entries = self._by_sk, self._keyed, self._entries
        records, refused = dict(before), dict(self._refused_by_sk)
        if _apply(keys, found, records, refused, entries):  # back in the Query's order (sort keys, ASCII)
            records, refused = _in_order(records), _in_order(refused)
        present = None if listed is None else listed()
        if present is not None and present != (sorted({*records, *refused}) if refused else list(records)):
            # an item deleted or put by anything but the agent (no version counts it): the read's keys say which
            keep = set(present)
            gone = [sk for sk in (*records, *refused) if sk not in keep]
            new = [sk for sk in present if sk not in records and sk not in refused]
            found = fetch(new) if new else {}
            if any(CONFIRMED_AT in item for item in found.values() if item is not None):
                return None
            moved = _apply(gone + new, found, records, refused, entries)
            keys += gone + new
            if moved:
                records, refused = _in_order(records), _in_order(refused)
        if expected is not None and len(records) + len(refused) != expected:
            return None  # without ``listed``, an item another writer deleted or put: read them all
        self._by_sk, self._refused_by_sk = records, refused
        self._last, self._version = (list(records.values()), list(refused.values())), version
        self._keyed = (
            None if keyed is None else _rekeyed(keyed, len(before), [(before.get(k), records.get(k)) for k in keys])
        )
        return self._last

    def by_instance(self, records: list[NodeRecord]) -> dict[str, NodeRecord]:
        """Instance id -> record of ``records`` (of an id held twice, the later record, as a map made from the list
        gives). For the memo's last answer (``records`` that list itself) the same map each time, made once and,
        after a ``patched`` answer, changed from the one before by the items it applied; shared: never change it."""
        mine = self._last is not None and records is self._last[0]
        if mine and self._keyed is not None:
            return self._keyed
        keyed = {record.instance_id: record for record in records}
        if mine:
            self._keyed = keyed
        return keyed

    def __len__(self) -> int:
        """How many records the memo holds (at most the number of items the last read was given)."""
        return len(self._entries)

    def records(
        self,
        items: Iterable[Mapping[str, Any]],
        mark: datetime | None,
        version: str | None = None,
        now: datetime | None = None,
    ) -> tuple[list[NodeRecord], list[Refused]]:
        """The records of ``items`` (``NODE#`` items, plain or as the table answered them: ``NodeRecord.confirmed``
        reads both alike), in their order, and the items that are not records.

        A record is ``NodeRecord.model_validate(item)``: its ``confirmed_at`` is None, not the mark's time. Judge its
        freshness at ``now`` by ``fresh_by_mark(mark, now, max_age) or record.fresh(now, max_age)``: exactly
        ``NodeRecord.confirmed(item, mark).fresh(now, max_age)`` (a record's age counts from the later of its own
        time and the mark's), without a copy of every record. An item that carries ``confirmed_at`` itself (the agent
        never stores it) is read as before, ``NodeRecord.confirmed(item, mark)``, and not remembered.

        Records are shared between reads: read them, never change them (their ``roles`` list included). The items
        are neither changed nor kept (the memo keeps copies of their values).

        ``version``: the ``MEMBERSHIP`` mark's version read before ``items`` (``read_membership``), with ``now``, the
        time of that read: the answer is kept for ``reused``. Without them, or when an item carries ``confirmed_at``
        (its record depends on the mark), nothing is kept for reuse.
        """
        kept: dict[str, _Entry] = {}
        records: list[NodeRecord] = []
        refused: list[Refused] = []
        by_sk: dict[str, NodeRecord] = {}
        keyed: dict[str, NodeRecord] = {}  # ``by_instance``'s map of this answer, made in the same loop
        entries = self._entries
        marked = False  # an item carrying ``confirmed_at``: its record is the mark's too, never reused
        for item in items:
            sk = str(item.get("sk", ""))
            try:
                values = _VALUES(item)
            except KeyError:
                values = tuple(map(item.get, FIELDS, _ABSENTS))
            entry = entries.get(sk)
            if (  # exactly the values the entry's record was validated from (module docstring)
                entry is not None
                and entry.values == values
                and entry.types == tuple(map(type, values))
                and (
                    not entry.deep
                    or (
                        tuple(map(type, values[entry.single[0]])) == entry.single[1]
                        if entry.single is not None
                        else _same_deep(entry, values)
                    )
                )
                and CONFIRMED_AT not in item
            ):
                kept[sk] = entry
                record = entry.record
                records.append(record)
                by_sk[sk] = keyed[entry.instance_id] = record
                continue
            try:
                if CONFIRMED_AT in item:
                    marked = True
                    records.append(NodeRecord.confirmed(item, mark))
                    continue
                record = NodeRecord.model_validate(item)
            except ValidationError as err:
                refused.append(Refused(sk, err))
                continue
            kept[sk] = _entry(values, record)
            records.append(record)
            by_sk[sk] = keyed[record.instance_id] = record
        self._entries = kept
        reusable = version is not None and now is not None and not marked
        self._last = (records, refused) if reusable else None
        self._version, self._read_at = (version, now) if reusable else (None, None)
        self._by_sk, self._refused_by_sk = by_sk, {bad.sk: bad for bad in refused}
        self._keyed = keyed if reusable else None
        return records, refused


def _apply(
    keys: list[str],
    found: Mapping[str, Mapping[str, Any] | None],
    records: dict[str, NodeRecord],
    refused: dict[str, Refused],
    entries: dict[str, _Entry],
) -> bool:
    """Each of ``keys``' item in ``found`` validated into ``records`` (and ``entries``: the next full read matches it)
    or ``refused``, in its key's place there, else at the end, and dropped from the others (all, when none); whether
    one was put at an end (to sort: a patch of rewritten items sorts nothing; sorting a thousand was most of it)."""
    moved = False
    for sk in keys:
        entries.pop(sk, None)
        if (item := found.get(sk)) is None:
            records.pop(sk, None)
            refused.pop(sk, None)
            continue
        try:
            record = NodeRecord.model_validate(item)
        except ValidationError as err:
            records.pop(sk, None)
            moved = moved or sk not in refused
            refused[sk] = Refused(sk, err)
        else:
            refused.pop(sk, None)
            moved = moved or sk not in records
            records[sk] = record
            entries[sk] = _entry(tuple(map(item.get, FIELDS, _ABSENTS)), record)
    return moved


def _in_order(by_sk: dict[str, Any]) -> dict[str, Any]:
    """``by_sk`` in its keys' order (the Query's), sorted as strings: half the cost of sorting its pairs."""
    keys = sorted(by_sk)
    return dict(zip(keys, map(by_sk.__getitem__, keys), strict=True))


def _rekeyed(
    keyed: dict[str, NodeRecord], count: int, changed: list[tuple[NodeRecord | None, NodeRecord | None]]
) -> dict[str, NodeRecord] | None:
    """``keyed`` (the map of ``count`` records by instance id) with each ``(old, new)`` record of an item applied: the
    map ``by_instance`` would make of the patched answer, or None when that cannot be told from these alone (an id
    held twice, before or after: which record is the later one is the list's order). Pure."""
    if len(keyed) != count:
        return None
    out = dict(keyed)
    for old, _ in changed:
        if old is not None:
            del out[old.instance_id]
    for _, new in changed:
        if new is not None:
            if new.instance_id in out:
                return None
            out[new.instance_id] = new
    return out


def _span(old: str, new: str) -> tuple[int, int] | None:
    """``(k, n)`` when ``old`` is ``<term>:<k>`` and ``new`` the same term's ``<n>``, ``n > k``; else None. Pure."""
    old_term, _, old_count = old.rpartition(":")
    term, _, count = new.rpartition(":")
    if term != old_term or not (old_count.isdecimal() and count.isdecimal()):
        return None
    k, n = int(old_count), int(count)
    return (k, n) if n > k else None


def _entry(values: tuple[Any, ...], record: NodeRecord) -> _Entry:
    copied = tuple(map(_copied, values))
    types = tuple(map(type, copied))
    deep = tuple(  # an empty list or map equal to another is an empty one of the same type: nothing more to see
        at
        for at, kind in enumerate(types)
        if kind not in _EXACT_BY_EQUALITY and not (kind in (list, dict) and not copied[at])
    )
    flat = tuple(
        (at, tuple(map(type, copied[at])))
        for at in deep
        if types[at] is list and all(type(inner) in _EXACT_BY_EQUALITY for inner in copied[at])
    )
    flat_or_none = flat if len(flat) == len(deep) else None
    single = flat[0] if flat_or_none is not None and len(flat) == 1 else None
    return _Entry(copied, types, deep, flat_or_none, single, record, record.instance_id)  # in the fields' order


def _same_deep(entry: _Entry, values: tuple[Any, ...]) -> bool:
    """With ``entry.values == values`` and the same types: whether the values ``entry.deep`` names are the same
    all the way down too."""
    if entry.flat is not None:  # lists of plain values only: their elements' types, in C
        return all(tuple(map(type, values[at])) == kinds for at, kinds in entry.flat)
    return all(_same_value(entry.values[at], values[at]) for at in entry.deep)


def _same_value(kept: Any, value: Any) -> bool:
    """``kept == value`` already holds; whether they are also the same types and text all the way down."""
    kind = type(kept)
    if kind is not type(value):
        return False
    if kind in _EXACT_BY_EQUALITY:
        return True
    if kind is list:
        return all(_same_value(a, b) for a, b in zip(kept, value, strict=True))
    if kind is dict:
        return tuple(kept) == tuple(value) and all(_same_value(inner, value[key]) for key, inner in kept.items())
    if kind in _BY_TEXT:
        return repr(kept) == repr(value)
    return False  # sets, binary values, anything else: validated again (a NODE# item has none)


def _copied(value: Any) -> Any:
    """``value`` with its lists and maps copied (the caller may not keep its item as it is)."""
    kind = type(value)
    if kind is dict:
        return {key: _copied(inner) for key, inner in value.items()}
    if kind is list:
        return [_copied(inner) for inner in value]
    return value  # the rest is immutable, or never answered from the memo (``_same_value``)
