"""Reading a ``RUN#`` item's rows back into steps (``core.runrecord`` lays them out and says how). Pure.

``unpack`` makes each row's step once for what the row holds (``_READ``; "Memos" in ``core.runrecord``), and hands
out again, without looking them up, the steps of the rows that are those of its last read of the same run at the same
places (``_LAST``, ``_again``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from itertools import compress, count, repeat
from operator import eq, is_, itemgetter, ne, not_
from typing import Any

from core.runrecord import COMMANDS, EXTRA_TIMES, HANDOVER_UNIT, command_id

_US = timedelta(microseconds=1)
# (maker, run id, created_at, groups, words) -> a row read -> what the maker made of it (``unpack``)
_READ: dict[tuple[Any, ...], dict[tuple[Any, ...], Any]] = {}
MEMO_RUNS = 4  # the runs (contexts) ``_READ`` keeps
MEMO_ROWS = 50_000  # the rows it keeps of one
# of each context ``_READ`` keeps, its last read: the memo it read with, its rows, their node name flags and the
# steps the next read may hand out again at their places (``_again``)
_LAST: dict[tuple[Any, ...], tuple[dict[tuple[Any, ...], Any], list[tuple[Any, ...]], list[bool], list[Any]]] = {}


def unpack(
    data: Mapping[str, Any],
    make: Callable[[dict[str, Any]], Any] | None = None,
    copy: Callable[[Any], Any] | None = None,
) -> dict[str, Any]:
    """An item's fields with its ``rows`` turned back into step maps, every step in ``index`` order (``data``
    unchanged but for that; an item without rows as it is). The rows may hold their numbers as the table answered
    them (``Decimal``: ``adapters.dynamo.values.plain_item``) or as ints: each is read with ``int()``, and a row's
    memo key is the same for both (``Decimal(3) == 3``, with the same hash).

    Args:
        make: what the reader makes of a row's step map (``RunStep.model_validate``), made once, the second time
            the row is read in the same run, words and groups (``_READ``; "Memos" in ``core.runrecord``); the
            first time it stays a map, as without ``make``, and so does a row ``make`` refuses (``ValueError``,
            which pydantic's ``ValidationError`` is), for the reader to refuse as before.
        copy: (with ``make``) what each read gets of what was made (``core.runs._read_copy``: its own copy of a
            step that may still change, the same object for a final one). Both keep the step's ``index`` (the
            row's first value): the steps are sorted by it as the rows give it.
    """
    out = dict(data)
    rows = out.pop("rows", None)
    words = [str(w) for w in out.pop("words", None) or []]
    if not rows:
        return out
    created = out["created_at"]
    created_at = created if isinstance(created, datetime) else datetime.fromisoformat(str(created))
    groups = [(_get(g, "name"), _get(g, "role")) for g in out.get("groups") or []]
    run_id = str(out.get("run_id", ""))
    steps = list(out.get("steps") or [])
    mapped = len(steps)  # the item's steps that are not rows (in flight): their own ``index`` is read below
    if make is None or copy is None:
        steps += [_step(row, groups, words, created_at, run_id) for row in rows]
    else:
        context = (make, run_id, created_at, tuple(groups), tuple(words))
        made = _rows_read(context)
        look = made.get  # once a read, not once a row

        def one(row: Sequence[Any]) -> tuple[Any, Any]:
            """The row's step as read now, and what the next read may take again at its place (None: nothing)."""
            key = (len(row) > 3 and row[3] is True, *row)  # a node_name True (the instance id) is not a 1
            try:
                done = look(key, _UNREAD)
            except TypeError:  # a list or a map in the row (a corrupt item): read as it is, no memo
                return _step(row, groups, words, created_at, run_id), None
            if done is _UNREAD:  # first read: the map, validated with the others by the reader as before
                if len(made) >= MEMO_ROWS:
                    made.clear()
                fields = _step(row, groups, words, created_at, run_id)
                made[key] = _Once(fields)
                return fields, None
            if isinstance(done, _Once):  # read again: made once now, copied from then on
                try:
                    done = made[key] = make(done.fields)
                except ValueError:
                    return done.fields, None
            handed = copy(done)
            return handed, handed if handed is done else None  # the made step itself: the same again next time

        steps += _again(rows, made, one, context)
    # sorted by ``index``, stably: a row's step's is the row's first value (``_step``; ``make`` and ``copy`` keep it),
    # read in C, not by ``_get`` a step (its ``Mapping`` check was about half of reading a 1,000-row item)
    keys = [int(_get(s, "index")) for s in steps[:mapped]]
    keys += map(int, map(_FIRST, rows))
    out["steps"] = list(map(steps.__getitem__, sorted(range(len(steps)), key=keys.__getitem__)))
    return out


_FIRST = itemgetter(0)
_FOURTH = itemgetter(3)  # a row's node name (``True``: the instance id)
_UNREAD = object()  # what ``_READ`` answers for a row not read before in its context


class _Once:
    """A row read once: its step map (a row read once only costs no ``make`` and no copy)."""

    __slots__ = ("fields",)

    def __init__(self, fields: dict[str, Any]) -> None:
        self.fields = fields


def _again(
    rows: Sequence[Sequence[Any]],
    made: dict[tuple[Any, ...], Any],
    one: Callable[[Sequence[Any]], tuple[Any, Any]],
    context: tuple[Any, ...],
) -> list[Any]:
    """What ``unpack`` appends for ``rows`` (``one`` of each, in order), but for each row equal (``==``, its node name
    flag alike) to the row at the same place of the last read of ``context`` with the same memo ``made`` (a copy of
    that row: the caller may change its rows) whose step was the made step itself (``one``'s second value): that step
    again, as ``one`` would give it (its memo entry is made: it only ever gives ``copy`` of it, which gave the step
    itself), unless the memo was cleared at an earlier row of this read (every later row is then read by ``one``, as
    in order). A run's item changes a few rows a pass: the others were looked up (each whole row hashed) and copied
    every read. Keeps this read as ``context``'s last (``_LAST``)."""
    last = _LAST.pop(context, None)
    try:  # copies: the caller may change its rows in place
        current, flags = list(map(tuple, rows)), list(map(is_, map(_FOURTH, rows), repeat(True)))
    except (IndexError, KeyError, TypeError):  # a row without a node name (a corrupt item): every row looked up
        return [one(row)[0] for row in rows]
    if last is None or last[0] is not made or len(last[1]) != len(rows):
        outs = list(map(one, rows))
        handed, again = [out[0] for out in outs], [out[1] for out in outs]
    else:
        handed, again = list(last[3]), list(last[3])
        fresh = set(compress(count(), map(not_, map(eq, current, last[1]))))
        fresh.update(compress(count(), map(ne, flags, last[2])), compress(count(), map(is_, again, repeat(None))))
        for at in sorted(fresh):  # in order, as a read looks rows up
            size = len(made)
            handed[at], again[at] = one(rows[at])
            if len(made) < size:  # cleared (``MEMO_ROWS``): every later row read as it is now
                for later in range(at + 1, len(rows)):
                    handed[later], again[later] = one(rows[later])
                break
    _LAST[context] = (made, current, flags, again)
    return handed


def _rows_read(context: tuple[Any, ...]) -> dict[tuple[Any, ...], Any]:
    """The rows ``unpack`` made something of in ``context`` (the maker, the run, its words and groups); the memo keeps
    the last ``MEMO_RUNS`` contexts (a run's words grow by a word now and then: a new context), each up to
    ``MEMO_ROWS`` rows."""
    made = _READ.pop(context, None)
    if made is None:
        made = {}
        while len(_READ) >= MEMO_RUNS:
            oldest = next(iter(_READ))
            del _READ[oldest]
            _LAST.pop(oldest, None)
    _READ[context] = made  # the most recent last
    return made


def _get(value: Any, name: str) -> Any:
    return value.get(name) if isinstance(value, Mapping) else getattr(value, name)


def _step(
    row: Sequence[Any], groups: Sequence[tuple[Any, Any]], words: Sequence[str], created_at: datetime, run_id: str
) -> dict[str, Any]:
    name, role = groups[int(row[1])]
    node = row[3]
    step: dict[str, Any] = {
        "index": int(row[0]),
        "group": name,
        "role": role,
        "instance_id": row[2],
        "node_name": row[2] if node is True else node,
        "needs_update": words[int(row[4])],
    }
    if len(row) <= 5:
        return step
    step["state"] = words[int(row[5])]
    step["surge_instance_id"] = row[6] if len(row) > 6 else None
    if len(row) > 7 and row[7] is not None:
        step["drain_status"] = words[int(row[7])]
    if len(row) > 8:
        step["note"] = words[int(row[8])]
    if len(row) > 10:
        bits = int(row[10])
        for bit, (field, suffix) in enumerate(COMMANDS):
            if bits & (1 << bit):
                step[field] = command_id(run_id, int(row[0]), suffix)
        if bits >= HANDOVER_UNIT:
            step["handed_over_to"] = int(row[0]) + bits // HANDOVER_UNIT
    if len(row) > 9:
        step.update(_read_times(words[int(row[9])].split(), row[11:], created_at))
    return step


def _read_times(keys: Iterable[str], values: Sequence[Any], created_at: datetime) -> dict[str, Any]:
    out: dict[str, Any] = {}
    entered: dict[str, datetime] = {}
    when = created_at
    for key, value in zip(keys, values, strict=True):
        when = when + int(value) * _US
        if key == "@started":
            out["started_at"] = when
        elif key in EXTRA_TIMES:
            out[EXTRA_TIMES[key]] = when
        else:
            entered[key] = when
    out["entered"] = entered
    return out
