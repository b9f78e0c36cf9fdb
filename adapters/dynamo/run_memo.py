"""The ``RUN#`` items an execution environment last saved or read, with the run each one is, so that a warm reader
finding exactly such an item again hands out that run instead of validating the item again (``RunMemo``).

Every refresher pass reads the active run's whole item and validates it (``Run.model_validate``: its rows unpacked,
``core.rowread``), then saves it whole; the next pass, usually in the same warm environment, reads back the item it
saved. At 1,000 steps validating it cost about a millisecond a pass (before the rows' own memo, several), growing with
the run. ``RunMemo`` keeps, per run, the item as the table holds it and the run it is: after a read, the item read and
the validated run; after a save (``RunStore.save``), the item as sent, with the map values DynamoDB does not keep
(None) left out as ``adapters.dynamo.values.dynamo`` leaves them out, and the run at rest (``Run.at_rest``: what
validating that item gives back, a contract of ``core.runs`` that a test holds). A later read of the same run is
answered from it only when the item read is that item, exactly: every attribute present alike, each value equal and
of the same type all the way into its lists and maps (Python's ``==`` alone holds ``True == 1``; a float compared by
its ``repr``), the rows compared as their ``marshal`` bytes (version 2, no references: equal bytes are equal values
of equal types, in C, a fifth of a millisecond at 1,000 steps). So an item changed by any writer, forged at the same
``version`` or only retyped is validated as before (and refused as before when it does not validate). A shed item
(``history_shed``: its final steps without their times) is not kept at save (it reads back as less than the run).

The read is the same whole, consistent read as before: the ``version`` alone cannot tell a forged item from the one
kept, and only the content can.

Each run handed out is a ``Run.working_copy`` of the one kept: its own shell, groups and steps in flight; the steps
at rest are shared, as every read of a row shares them (``core.runs._read_copy``: no code changes a step at rest in
place). Bounded: the last ``MEMO_RUNS`` runs (by sort key). Lives in ``RunStore`` (one per ``Deps``: per execution
environment). Pure: no I/O.
"""

from __future__ import annotations

import marshal
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.runs import Run

MEMO_RUNS = 4  # the runs kept (at most one is active; a few more cover status reads and tests)
ROWS = "rows"  # the attribute of the item compared as bytes (``core.runrecord``'s rows: scalars only)


@dataclass(frozen=True)
class _Kept:
    rows: bytes | None  # ``marshal.dumps(item["rows"], 2)`` (None: the item has no rows)
    rest: dict[str, Any]  # every other attribute, a private copy
    run: Run  # private: handed out as ``working_copy``s


class RunMemo:
    """Sort key of a ``RUN#`` item -> the item last saved or read there and the run it is (module docstring)."""

    def __init__(self) -> None:
        self._kept: dict[str, _Kept] = {}
        self.hits = 0  # reads answered from a kept run (for tests and benchmarks)

    def read(self, item: Mapping[str, Any]) -> Run:
        """The run ``item`` (plain values, keys included, as ``Table`` reads answer) is: the run kept for it when it
        is exactly the item kept (module docstring), else validated (and kept).

        Raises:
            pydantic.ValidationError: the item is not a run (nothing kept).
        """
        sk = item.get("sk")
        kept = self._kept.get(sk) if isinstance(sk, str) else None
        if kept is not None and _matches(item, kept):
            self.hits += 1
            return kept.run.working_copy()
        run = Run.model_validate(item)
        if isinstance(sk, str):
            self._keep(sk, item, run.working_copy())
        return run

    def saved(self, item: Mapping[str, Any], run: Run) -> None:
        """``item`` (attributes and keys, as ``Table.put`` was given them) was written for ``run``: keep it as the
        table holds it, with ``run`` at rest. A shed item is not kept (module docstring)."""
        sk = item.get("sk")
        if not isinstance(sk, str):
            return
        if item.get("history_shed") or run.history_shed:
            self._kept.pop(sk, None)
            return
        stored = {k: _as_stored(v) if k != ROWS else v for k, v in item.items() if v is not None}
        self._keep(sk, stored, run.at_rest().working_copy())

    def forget(self, sk: str) -> None:
        """Drop what is kept of the item ``sk`` (a write whose outcome is unknown)."""
        self._kept.pop(sk, None)

    def _keep(self, sk: str, item: Mapping[str, Any], run: Run) -> None:
        try:
            rows = marshal.dumps(item[ROWS], 2) if ROWS in item else None
            rest = marshal.loads(marshal.dumps({k: v for k, v in item.items() if k != ROWS}, 2))  # a deep copy
        except ValueError:  # a value marshal does not take (a Decimal): not kept
            self._kept.pop(sk, None)
            return
        self._kept.pop(sk, None)
        while len(self._kept) >= MEMO_RUNS:
            self._kept.pop(next(iter(self._kept)))
        self._kept[sk] = _Kept(rows, rest, run)


def _matches(item: Mapping[str, Any], kept: _Kept) -> bool:
    """Whether ``item`` is exactly the item ``kept`` was made of (module docstring)."""
    rows = item.get(ROWS)
    if (rows is None) != (kept.rows is None) or len(item) != len(kept.rest) + (rows is not None):
        return False
    if rows is not None:
        try:
            if type(rows) is not list or marshal.dumps(rows, 2) != kept.rows:
                return False
        except ValueError:
            return False
    return all(k == ROWS or (k in kept.rest and same(v, kept.rest[k])) for k, v in item.items())


def same(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are equal and of the same types all the way into their lists and maps (a map's order
    aside; a float by its ``repr``, so ``0.0`` is not ``-0.0``). Pure."""
    kind = type(a)
    if kind is not type(b):
        return False
    if kind is dict:
        return a.keys() == b.keys() and all(same(v, b[k]) for k, v in a.items())
    if kind is list or kind is tuple:
        return len(a) == len(b) and all(map(same, a, b))
    if kind is float:
        return repr(a) == repr(b)
    if kind in (str, int, bool, type(None), bytes):
        return bool(a == b)
    return False  # anything else (a set, a Decimal): not known to be the same


def _as_stored(value: Any) -> Any:
    """``value`` as DynamoDB keeps it after ``adapters.dynamo.values.dynamo``: maps without their None values (a
    list's are kept). Other conversions (a float) are not made: such an item then does not match, and is validated."""
    if type(value) is dict:
        return {k: _as_stored(v) for k, v in value.items() if v is not None}
    if type(value) is list:
        return [_as_stored(v) for v in value]
    return value
