"""A Query's FilterExpression judged once per stored item (``Verdicts``), for ``sim.dynamo.MemoryTable.query``.

A FilterExpression's verdict on an item is a function of the item and the request's expression, names and values
alone ("Filter expressions for Query", DynamoDB Developer Guide), and the in-memory table never changes a stored item
in place (a write stores a new object: ``sim.dynamo.MemoryTable.store``). So the verdict on the very item object
judged before, under the same filter, is the one judged then. Some readers query the same large range with the same
filter again and again (the replenisher's pointer backfill reads every ``CMD#`` item of the week every half hour for
the few without ``indexed``; the refresher's pass the cluster partition with its ``RUN#`` items): each item was
evaluated again every time, in Python, though few of them had changed. The answers are exactly the same; only the
evaluations of unchanged items are saved.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from sim.values import Item

FILTERS_KEPT = 16  # the filters (expression, names, values) whose verdicts are kept, the most recently used
ITEMS_KEPT = 100_000  # the verdicts kept for one filter (cleared past it)

Judge = Callable[[str, Item], bool]


class Verdicts:
    """Per filter, each item's verdict, by (partition, sort key), with the item object it was judged on."""

    def __init__(self) -> None:
        self._by_filter: dict[Hashable, dict[tuple[str, str], tuple[Item, bool]]] = {}

    def judge(
        self, holds: Callable[[str, Item], bool], text: str, names: dict[str, str], values: dict[str, Any], pk: str
    ) -> Judge:
        """What judges an item of partition ``pk`` (given its sort key) for one Query: ``holds(text, item)`` (the
        filter ``text`` evaluated with ``names`` and ``values``: ``Expressions.holds``), or the verdict on the same
        item object under the same filter. A filter with a value that cannot be a key (a list, a map, a set) is
        evaluated every time."""
        key = (text, tuple(sorted(names.items())), tuple(sorted(values.items())))
        try:
            hash(key)
        except TypeError:
            return lambda sk, item: holds(text, item)
        by_filter = self._by_filter
        seen = by_filter.pop(key, None)
        if seen is None or len(seen) > ITEMS_KEPT:
            seen = {}
            while len(by_filter) >= FILTERS_KEPT:
                del by_filter[next(iter(by_filter))]
        by_filter[key] = seen  # the most recently used last
        look = seen.get

        def judged(sk: str, item: Item) -> bool:
            got = look((pk, sk))
            if got is not None and got[0] is item:
                return got[1]
            verdict = holds(text, item)  # raises as it would (nothing kept)
            seen[pk, sk] = (item, verdict)
            return verdict

        return judged

    def forget(self, key: tuple[str, str]) -> None:
        """Drop what is kept of the item at ``key`` (deleted: the object is not kept alive for nothing)."""
        for seen in self._by_filter.values():
            seen.pop(key, None)
