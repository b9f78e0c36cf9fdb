"""The rows of the last ``RUN#`` item one writer packed, so its next save packs and sizes only the steps that
changed (``core.runrecord`` lays the rows out). Pure.

A refresher pass over a large run changes a step or two and writes the whole item (``adapters.dynamo.runs``): packing
and sizing every row again was most of a 1,000-step run's save, O(steps) a pass and O(steps^2) over the run.
``RowCache.pack`` gives exactly what ``core.runrecord.pack`` gives (the same rows, ``words`` in the same order, the
same steps left as maps) and the rows' size as ``core.itemsize`` counts it, and works out again only:

- a step that is not the object packed at its position last time (``is``, never equality): a step **at rest**
  (final, or pending with its plan only: what a row holds) is never changed in place (a decision copies a pending
  step before it changes it, ``Context.own``, and never changes a final one; ``core.runs._read_copy``), so the same
  object at the same position packs to the same row;
- a step that stayed a map (in flight, or one a row cannot hold): it may have been changed in place;
- every row, when anything else changed: the run, its ``created_at`` or its groups, fewer steps, an index out of
  order next to a changed step, or a changed row that moves a word's first appearance (``words`` are numbered in the
  order rows first name them: a changed row that was a word's first, or that names a known word before its first,
  or a new word before the last first appearance). Such a pass costs what it did without the cache.

Memory: one run's rows, numbers and sizes (the last one packed, whichever run that was).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from itertools import compress, repeat
from operator import is_not
from typing import Any, cast

from core.itemsize import row_bytes
from core.runrecord import WORD_SLOTS, GroupLike, S, pack, spelled


class RowCache:
    """The last pack of one writer (a ``RunStore``): rows, words and row sizes by step position.

    Attributes:
        reworked: how many steps the last pack worked out again (the others were reused).
    """

    def __init__(self) -> None:
        self._context: tuple[Any, ...] | None = None
        self._steps: list[Any] = []  # the step objects last packed, by position
        self._rows: list[list[Any] | None] = []  # their numbered rows (None: a map)
        self._sizes: list[int] = []  # each row's bytes (0: a map)
        self._words: dict[str, int] = {}
        self._first: dict[str, int] = {}  # word -> the position of the row that first names it
        self._firsts: set[int] = set()  # those positions, and the last of them (-1: none)
        self._last_first = -1
        self._maps: list[int] = []  # positions of the steps that stayed maps
        self._last: list[list[Any]] | None = None  # the rows list the last pack gave, and its size
        self._last_bytes = 0
        self.reworked = 0

    def pack(
        self,
        steps: Sequence[S],
        groups: Sequence[GroupLike],
        created_at: datetime,
        shed: bool = False,
        run_id: str = "",
    ) -> tuple[list[list[Any]], list[str], list[S]]:
        """``core.runrecord.pack``'s result, from the last pack's rows where the steps are the same objects (module
        docstring); ``rows_bytes`` gives their size. A ``shed`` pack is ``pack``'s own (nothing kept or reused).

        The rows returned are the cache's own lists (the next pack hands them out again): read them, never change
        them. Every step in flight is among the steps returned as maps (a row holds a step at rest), as with ``pack``.
        """
        if shed:
            return pack(steps, groups, created_at, shed, run_id)
        places = {g.name: (n, g.role) for n, g in enumerate(groups)}
        context = (run_id, created_at, tuple(places.items()))
        old = self._steps
        if context == self._context and len(steps) >= len(old) and self._rows:
            changed = sorted({*compress(range(len(old)), map(is_not, steps, old)), *self._maps})
            changed += range(len(old), len(steps))
            if len(changed) * 4 <= len(steps) and self._patch(steps, changed, places, created_at, run_id):
                return self._result(steps)
        self._repack(steps, groups, created_at, run_id, context)
        return self._result(steps)

    def rows_bytes(self, rows: object) -> int | None:
        """The size of ``rows`` as ``core.itemsize.value_bytes`` counts it (without an attribute name) when it is
        the list the last ``pack`` gave (the same object), else None (not known here)."""
        return self._last_bytes if rows is self._last and rows is not None else None

    def _result(self, steps: Sequence[S]) -> tuple[list[list[Any]], list[str], list[S]]:
        rows = cast(list[list[Any]], list(compress(self._rows, map(is_not, self._rows, repeat(None)))))  # in C
        self._last, self._last_bytes = rows, 3 + len(rows) + sum(self._sizes)
        return rows, list(self._words), [steps[p] for p in self._maps]

    def _repack(
        self, steps: Sequence[S], groups: Sequence[GroupLike], created_at: datetime, run_id: str, context: Any
    ) -> None:
        """Every row worked out (``core.runrecord.pack``, its memo), and where each word is first named."""
        rows, words, maps = pack(steps, groups, created_at, run_id=run_id)
        mapped = {id(s) for s in maps}
        self._context, self._steps, self._maps = context, list(steps), []
        self._rows, self._sizes, self._first = [], [], {}
        by_number = list(words)
        it = iter(rows)
        for position, step in enumerate(steps):
            if id(step) in mapped:
                self._maps.append(position)
                self._rows.append(None)
                self._sizes.append(0)
                continue
            row = next(it)
            self._rows.append(row)
            self._sizes.append(row_bytes(row))
            for slot in WORD_SLOTS:
                if slot < len(row) and row[slot] is not None:
                    self._first.setdefault(by_number[row[slot]], position)
        self._words = {w: n for n, w in enumerate(words)}
        self._firsts = set(self._first.values())
        self._last_first = max(self._firsts, default=-1)
        self.reworked = len(steps)

    def _patch(
        self,
        steps: Sequence[S],
        changed: list[int],
        places: dict[str, tuple[int, str]],
        created_at: datetime,
        run_id: str,
    ) -> bool:
        """The rows at ``changed`` worked out again, the others kept; False (nothing kept changed) when that would
        not give ``pack``'s result (module docstring). The words the rows name are looked up, and those new to the
        run added, with no pass over every word (a run's words grow with its steps)."""
        known, last_first = self._first, self._last_first
        added: dict[str, int] = {}  # a word no row named before -> the position of the row that first names it
        made: list[tuple[int, Sequence[Any] | None]] = []
        for position in changed:
            if position in self._firsts:
                return False
            index = steps[position].index
            if (position > 0 and steps[position - 1].index >= index) or (
                position + 1 < len(steps) and steps[position + 1].index <= index
            ):
                return False  # out of order: every step stays a map
            row = spelled(steps[position], places, created_at, False, run_id)
            if row is not None:
                for slot in WORD_SLOTS:
                    word = row[slot] if slot < len(row) else None
                    if word is None or word in added:  # (added at an earlier changed position)
                        continue
                    if word in known:
                        if known[word] > position:
                            return False
                    elif position < last_first:
                        return False
                    else:
                        added[word] = last_first = position
            made.append((position, row))
        words = self._words  # nothing refused from here on: the words added numbered after the others, in order
        words.update(zip(added, range(len(words), len(words) + len(added)), strict=True))
        known.update(added)
        self._firsts.update(added.values())
        self._last_first = last_first
        extra = len(steps) - len(self._steps)
        self._steps = list(steps)
        self._rows += [None] * extra
        self._sizes += [0] * extra
        maps = set(self._maps)
        for position, row in made:
            if row is None:
                maps.add(position)
                self._rows[position], self._sizes[position] = None, 0
                continue
            maps.discard(position)
            numbered = list(row)
            for slot in WORD_SLOTS:
                if slot < len(numbered) and numbered[slot] is not None:
                    numbered[slot] = words[numbered[slot]]
            self._rows[position], self._sizes[position] = numbered, row_bytes(numbered)
        self._maps = sorted(maps)
        self.reworked = len(changed)
        return True
