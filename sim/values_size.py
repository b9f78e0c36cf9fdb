"""Put items canonicalised and sized in one pass (``sized_canonical_item``), with memos for what a large item repeats.

The in-memory table (``sim.dynamo``) canonicalises every Put's item as boto3 round-trips it and sizes it as DynamoDB
counts ("Item sizes and formats"), to refuse items over 400 KB. A refresh run's ``RUN#`` item holds about a thousand
rows (lists of scalars, ``core.runrecord``) written again on every save with mostly the same content, and the
``MEMBERSHIP`` mark a list of small maps: each such row or map is canonicalised and sized once for its content and
exact types (``True``, ``1`` and ``Decimal(1)`` are equal in Python but not in DynamoDB), never for an object's
identity. The answers are the plain ``canonical`` and ``value_bytes`` ones (``tests/unit/sim/test_values_size.py``).
"""

from __future__ import annotations

from itertools import chain, repeat
from marshal import dumps
from operator import itemgetter
from typing import Any, cast

from sim.values import _ROW_SCALARS, _ROWS_KEPT, Item, _canonical_row, _row_bytes, canonical, value_bytes


def sized_canonical_item(item: Item) -> tuple[Item, int]:
    """``canonical_item(item)`` and its ``item_bytes`` (bytes), a list of scalars in a list (a ``RUN#`` row)
    canonicalised and sized by one look-up of its content (``_SIZED_ROWS``), not one each.

    Raises:
        TypeError: as ``canonical``.
    """
    out: Item = {}
    total = 0
    for name, value in item.items():
        key = name if type(name) is str else str(name)
        kind = type(value)
        if kind is str:  # most attributes: kept as they are (``canonical``), sized as ``value_bytes`` sizes them
            stored, size = value, len(value) if value.isascii() else len(value.encode("utf-8"))
        elif kind is list:
            stored, size = _sized_list(value)
        elif kind is bool or value is None:
            stored, size = value, 1
        else:
            stored = canonical(value)
            size = value_bytes(stored)
        out[key] = stored
        total += (len(key) if key.isascii() else len(key.encode("utf-8"))) + size
    return out, total


# a list of scalars by its values -> its values' types, its canonical values and their size (``_canonical_row`` and
# ``_row_bytes`` of them in one entry): a pure memo, bounded, shared by every run. Keyed by the values alone (one
# tuple hashed, not two), an entry answers only a row of the same types: ``True``, ``1`` and ``Decimal(1)`` share a
# key, and a row of other types than its entry's is made anew (and takes the key over)
_SIZED_ROWS: dict[tuple[Any, ...], tuple[tuple[type, ...], tuple[Any, ...], int]] = {}
# the same for a row marshal writes, keyed by ``marshal.dumps(row, 0)``: bytes that name each value's exact type (``T``,
# ``i``, ``N``, ``u``: ``True``, ``1`` and ``1.0`` apart; a subclass or a Decimal is refused) and content (version 0:
# strings as UTF-8, no references or interning marks, so equal content always gives equal bytes), so equal keys are
# rows of equal values of the same types, checked in one C call instead of a ``type()`` call a value
_MARSHALLED: dict[bytes, tuple[tuple[Any, ...], int]] = {}
_CANONICAL, _SIZE = itemgetter(0), itemgetter(1)  # of a ``_MARSHALLED`` entry
_LIST, _DICT = {list}, {dict}


def _sized_list(values: list[Any]) -> tuple[list[Any], int]:
    """``canonical`` of a list and the size of the result (``value_bytes``)."""
    if values and type(values[0]) is dict and len(values) <= _MAP_LIST_LENGTH:  # the mark's ``changes``: at once
        return _sized_maps(values)
    if values and set(map(type, values)) == _LIST:  # a RUN# item's rows: every row looked up at once, in C
        try:
            found = list(map(_MARSHALLED.get, map(dumps, values, repeat(0))))
        except ValueError:  # a value marshal refuses: the rows one by one below
            found = [None]
        if None not in found:  # every row known: what the loop below gives, without a Python step a row
            hits = cast(list[tuple[tuple[Any, ...], int]], found)
            return list(map(list, map(_CANONICAL, hits))), 3 + len(values) + sum(map(_SIZE, hits))
    return _each(values)


def _each(values: list[Any]) -> tuple[list[Any], int]:
    """``_sized_list`` one value at a time."""
    out: list[Any] = []
    total = 3 + len(values)
    for value in values:
        if type(value) is dict:
            stored, size = _sized_map(value)
            out.append(stored)
            total += size
            continue
        if type(value) is not list:
            stored = canonical(value)
            out.append(stored)
            total += value_bytes(stored)
            continue
        try:
            code = dumps(value, 0)  # its values and their exact types in one C call (``_MARSHALLED``)
        except ValueError:  # a type marshal does not write (a Decimal, a Binary, a subclass): by ``_SIZED_ROWS``
            code = b""  # never a key: marshal writes a byte at least
        sized = _MARSHALLED.get(code)
        if sized is not None:
            out.append(list(sized[0]))
            total += sized[1]
            continue
        row = tuple(value)
        types = tuple(map(type, row))
        try:
            known = _SIZED_ROWS.get(row)
        except TypeError:  # an element that is not hashable (a list, a map, a set): never a row the memo holds
            known = None
        if known is None or known[0] != types:  # an entry's types are scalars (below): so are the row's
            made = _canonical_row(value)
            known = (types, tuple(made), _row_bytes(made))
            memo: dict[Any, Any] = _MARSHALLED if code else _SIZED_ROWS
            if _ROW_SCALARS.issuperset(types):
                if len(memo) >= _ROWS_KEPT:
                    memo.clear()
                memo[code or row] = (known[1], known[2]) if code else known
        out.append(list(known[1]))
        total += known[2]
    return out, total


# a map in a list by its items -> its values' types, its canonical form and its size (``value_bytes``): a pure memo,
# bounded, shared by every run, as ``_SIZED_ROWS``. An entry holds a map of string keys and scalar values only (the
# ``MEMBERSHIP`` mark's ``changes``, ``{"seq": n, "sk": "NODE#..."}``, put again every minute with the same entries)
# and answers only a map of the same value types: ``True``, ``1`` and ``Decimal(1)`` are equal in Python
_SIZED_MAPS: dict[tuple[tuple[Any, Any], ...], tuple[tuple[type, ...], Item, int]] = {}
_TEXT = {str}
# a list of maps by ``marshal.dumps(values, 0)`` (exact types, keys in order, content: as ``_MARSHALLED``) -> its
# canonical maps and its size: the ``MEMBERSHIP`` mark's ``changes``, put every minute with the same 16 entries,
# sized by one C call and one look-up instead of a look-up a map; a pure memo, bounded, shared by every run
_MAP_LISTS: dict[bytes, tuple[tuple[Item, ...], int]] = {}
_MAP_LISTS_KEPT = 1_000
_MAP_LIST_LENGTH = 64  # longer lists one map at a time: an entry's size stays small


def _sized_maps(values: list[Any]) -> tuple[list[Any], int]:
    """``_sized_list`` of a list that starts with a map: by ``_MAP_LISTS`` when its values are all maps of scalars
    marshal writes (a new map each time, as ``_sized_map``), else one value at a time."""
    try:
        code = dumps(values, 0)
    except ValueError:  # a type marshal does not write (a Decimal, a Binary, a subclass): not kept
        code = b""
    known = _MAP_LISTS.get(code) if code else None
    if known is not None:
        return list(map(dict, known[0])), known[1]
    out, total = _each(values)
    kept = bool(code) and set(map(type, out)) == _DICT
    if kept and _ROW_SCALARS.issuperset(chain.from_iterable(map(map, repeat(type), map(dict.values, out)))):
        if len(_MAP_LISTS) >= _MAP_LISTS_KEPT:
            _MAP_LISTS.clear()
        _MAP_LISTS[code] = (tuple(map(dict, out)), total)
    return out, total


def _sized_map(value: Item) -> tuple[Item, int]:
    """``canonical`` of a map in a list and its ``value_bytes``, a map of scalars remembered by its content (a new
    map each time: the table may change the one it stores).

    Raises:
        TypeError: as ``canonical`` (never from the memo: only maps ``canonical`` took are kept).
    """
    key = tuple(value.items())
    types = tuple(map(type, value.values()))
    try:
        known = _SIZED_MAPS.get(key)
    except TypeError:  # a value that is not hashable (a list, a map, a set): never a map the memo holds
        known = None
    if known is None or known[0] != types:
        stored, sizes = {}, []  # ``canonical(value)`` and ``value_bytes`` of it, a list of strings sized in C
        for name, field in value.items():
            if type(field) is list and field and set(map(type, field)) == _TEXT:  # a step's ``surge_baseline``
                text = "".join(field)
                stored[name] = list(field)
                sizes.append(3 + len(field) + (len(text) if text.isascii() else len(text.encode("utf-8"))))
            else:
                stored[name] = canonical(field)
                sizes.append(value_bytes(stored[name]))
        known = (types, stored, 3 + sum(1 + len(k.encode("utf-8")) + n for k, n in zip(stored, sizes, strict=True)))
        if _ROW_SCALARS.issuperset(types) and all(type(k) is str for k in value):
            if len(_SIZED_MAPS) >= _ROWS_KEPT:
                _SIZED_MAPS.clear()
            _SIZED_MAPS[key] = known
            return dict(stored), known[2]
        return stored, known[2]
    return dict(known[1]), known[2]
