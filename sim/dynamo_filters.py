"""A Query's FilterExpression judged once per stored item (``Verdicts``), for ``sim.dynamo.MemoryTable.query``.

A FilterExpression's verdict on an item is a function of the item and the request's expression, names and values
alone ("Filter expressions for Query", DynamoDB Developer Guide), and the in-memory table never changes a stored item
in place (a write stores a new object: ``sim.dynamo.MemoryTable.store``). So the verdict on the very item object
judged before, under the same filter, is the one judged then. Some readers query the same large range with the same
filter again and again (the replenisher's pointer backfill reads every ``CMD#`` item of the week every half hour for
the few without ``indexed``; the refresher's pass the cluster partition with its ``RUN#`` items): each item was
evaluated again every time, in Python, though few of them had changed. A whole page (``MemoryTable._whole``) is
judged at once: the items that are the very objects at the same places as in the last whole page read of the same
partition under the same filter keep their verdicts (a quiet partition's page is the same list of objects), the others
are judged one by one. The answers are exactly the same; only the evaluations of unchanged items are saved.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from itertools import compress, count
from operator import is_not
from typing import Any

from sim.values import Item

FILTERS_KEPT = 16  # the filters (expression, names, values) whose verdicts are kept, the most recently used
ITEMS_KEPT = 100_000  # the verdicts kept for one filter (cleared past it)


class _Kept:
    """One filter's verdicts: by (partition, sort key) with the item object judged, and each partition's last whole
    page (the items read, in order, and their verdicts)."""

    __slots__ = ("pages", "seen")

    def __init__(self) -> None:
        self.seen: dict[tuple[str, str], tuple[Item, bool]] = {}
        self.pages: dict[str, tuple[list[Item], list[bool]]] = {}


class Judge:
    """One Query's filter, judged as ``holds(text, item)`` (``Expressions.holds``) would, or as it did on the same
    item object before (``Verdicts.judge``)."""

    def __init__(self, holds: Callable[[str, Item], bool], text: str, pk: str, kept: _Kept | None) -> None:
        self._holds, self._text, self._pk, self._kept = holds, text, pk, kept

    def __call__(self, sk: str, item: Item) -> bool:
        """Whether the filter keeps ``item`` (stored at ``sk``); raises as the filter does (nothing kept)."""
        kept = self._kept
        if kept is None:
            return self._holds(self._text, item)
        got = kept.seen.get((self._pk, sk))
        if got is not None and got[0] is item:
            return got[1]
        verdict = self._holds(self._text, item)
        kept.seen[self._pk, sk] = (item, verdict)
        return verdict

    def kept(self, keys: list[str], items: list[Item]) -> list[Item]:
        """Of a whole page (``items`` at ``keys``, in the Query's order), those the filter keeps, in order: judged in
        that order (the first one the filter cannot judge raises), but for an item that is the very object at the
        same place of the last whole page of this partition under this filter, whose verdict was that page's."""
        kept = self._kept
        if kept is None:
            return list(compress(items, map(self, keys, items)))
        last = kept.pages.get(self._pk)
        if last is None or len(last[0]) != len(items):
            verdicts = list(map(self, keys, items))
        else:
            verdicts = list(last[1])
            for at in compress(count(), map(is_not, items, last[0])):
                verdicts[at] = self(keys[at], items[at])
        kept.pages[self._pk] = (items, verdicts)
        return list(compress(items, verdicts))


class Verdicts:
    """Per filter, each item's verdict (``_Kept``)."""

    def __init__(self) -> None:
        self._by_filter: dict[Hashable, _Kept] = {}

    def judge(
        self, holds: Callable[[str, Item], bool], text: str, names: dict[str, str], values: dict[str, Any], pk: str
    ) -> Judge:
        """The ``Judge`` of one Query of partition ``pk`` whose filter is ``text`` with ``names`` and ``values``. A
        filter with a value that cannot be a key (a list, a map, a set) is evaluated every time."""
        key = (text, tuple(sorted(names.items())), tuple(sorted(values.items())))
        try:
            hash(key)
        except TypeError:
            return Judge(holds, text, pk, None)
        by_filter = self._by_filter
        kept = by_filter.pop(key, None)
        if kept is None or len(kept.seen) > ITEMS_KEPT:
            kept = _Kept()
            while len(by_filter) >= FILTERS_KEPT:
                del by_filter[next(iter(by_filter))]
        by_filter[key] = kept  # the most recently used last
        return Judge(holds, text, pk, kept)

    def forget(self, key: tuple[str, str]) -> None:
        """Drop what is kept of the item at ``key`` (deleted: the object is not kept alive for nothing)."""
        for kept in self._by_filter.values():
            kept.seen.pop(key, None)
