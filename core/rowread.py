"""Reading a ``RUN#`` item's rows back into steps (``core.runrecord`` lays them out and says how). Pure.

``unpack`` makes each row's step once for what the row holds (``_READ``; "Memos" in ``core.runrecord``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from operator import itemgetter
from typing import Any

from core.runrecord import COMMANDS, EXTRA_TIMES, HANDOVER_UNIT, command_id

_US = timedelta(microseconds=1)
# (maker, run id, created_at, groups, words) -> a row read -> what the maker made of it (``unpack``)
_READ: dict[tuple[Any, ...], dict[tuple[Any, ...], Any]] = {}
MEMO_RUNS = 4  # the runs (contexts) ``_READ`` keeps
MEMO_ROWS = 50_000  # the rows it keeps of one


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
        made = _rows_read((make, run_id, created_at, tuple(groups), tuple(words)))
        look, append = made.get, steps.append  # once a read, not once a row
        for row in rows:
            key = (len(row) > 3 and row[3] is True, *row)  # a node_name True (the instance id) is not a 1
            try:
                done = look(key, _UNREAD)
            except TypeError:  # a list or a map in the row (a corrupt item): read as it is, no memo
                append(_step(row, groups, words, created_at, run_id))
                continue
            if done is _UNREAD:  # first read: the map, validated with the others by the reader as before
                if len(made) >= MEMO_ROWS:
                    made.clear()
                fields = _step(row, groups, words, created_at, run_id)
                made[key] = _Once(fields)
                append(fields)
                continue
            if isinstance(done, _Once):  # read again: made once now, copied from then on
                try:
                    done = made[key] = make(done.fields)
                except ValueError:
                    append(done.fields)
                    continue
            append(copy(done))
    # sorted by ``index``, stably: a row's step's is the row's first value (``_step``; ``make`` and ``copy`` keep it),
    # read in C, not by ``_get`` a step (its ``Mapping`` check was about half of reading a 1,000-row item)
    keys = [int(_get(s, "index")) for s in steps[:mapped]]
    keys += map(int, map(_FIRST, rows))
    out["steps"] = list(map(steps.__getitem__, sorted(range(len(steps)), key=keys.__getitem__)))
    return out


_FIRST = itemgetter(0)
_UNREAD = object()  # what ``_READ`` answers for a row not read before in its context


class _Once:
    """A row read once: its step map (a row read once only costs no ``make`` and no copy)."""

    __slots__ = ("fields",)

    def __init__(self, fields: dict[str, Any]) -> None:
        self.fields = fields


def _rows_read(context: tuple[Any, ...]) -> dict[tuple[Any, ...], Any]:
    """The rows ``unpack`` made something of in ``context`` (the maker, the run, its words and groups); the memo keeps
    the last ``MEMO_RUNS`` contexts (a run's words grow by a word now and then: a new context), each up to
    ``MEMO_ROWS`` rows."""
    made = _READ.pop(context, None)
    if made is None:
        made = {}
        while len(_READ) >= MEMO_RUNS:
            _READ.pop(next(iter(_READ)))
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
