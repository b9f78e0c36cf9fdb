"""Put items canonicalised and sized in one pass (``sized_canonical_item``), with memos for what a large item repeats.

The in-memory table (``sim.dynamo``) canonicalises every Put's item as boto3 round-trips it and sizes it as DynamoDB
counts ("Item sizes and formats"), to refuse items over 400 KB. A refresh run's ``RUN#`` item holds about a thousand
rows (lists of scalars, ``core.runrecord``) written again on every save with mostly the same content, and the
``MEMBERSHIP`` mark a list of small maps: each such row or map is canonicalised and sized once for its content and
exact types (``True``, ``1`` and ``Decimal(1)`` are equal in Python but not in DynamoDB), never for an object's
identity. A list of rows is compared whole with the last ones sized, by its bytes (``_sized_rows``): only the rows
between the first and the last byte that differ are looked up, a save's one or two of a thousand. The answers are the
plain ``canonical`` and ``value_bytes`` ones (``tests/unit/sim/test_values_size.py``); no stored list is a caller's.
"""

from __future__ import annotations

from contextlib import suppress
from decimal import Decimal
from itertools import accumulate, chain, repeat
from marshal import dumps
from operator import add, itemgetter
from typing import Any

from sim.values import _ROW_SCALARS, _ROWS_KEPT, SMALL_INT, Item, _canonical_row, _row_bytes, canonical, value_bytes


def sized_canonical_item(item: Item, parts: dict[str, int] | None = None) -> tuple[Item, int]:
    """``canonical_item(item)`` and its ``item_bytes`` (bytes), a list of scalars in a list (a ``RUN#`` row)
    canonicalised and sized by one look-up of its content (``_SIZED_ROWS``), not one each. With ``parts``, the
    ``value_bytes`` of each list, map or set attribute is put in it by name (``sim.dynamo`` sizes an update from them).

    Raises:
        TypeError: as ``canonical``.
    """
    out: Item = {}
    total = 0
    for name, value in item.items():
        key = name if type(name) is str else str(name)
        stored, size = sized_value(value)
        if parts is not None and type(stored) in _CONTAINERS:
            parts[key] = size
        out[key] = stored
        total += (len(key) if key.isascii() else len(key.encode("utf-8"))) + size
    return out, total


_CONTAINERS = frozenset({list, dict, set})


def sized_value(value: Any) -> tuple[Any, int]:
    """``canonical(value)`` and its ``value_bytes``.

    Raises:
        TypeError: as ``canonical``.
    """
    kind = type(value)
    if kind is str:  # most attributes: kept as they are (``canonical``), sized as ``value_bytes`` sizes them
        return value, len(value) if value.isascii() else len(value.encode("utf-8"))
    if kind is list:
        return _sized_list(value)
    if kind is bool or value is None:
        return value, 1
    if kind is int and -SMALL_INT < value < SMALL_INT:  # ``canonical``'s Decimal, sized by its significant digits
        digits = str(value).lstrip("-").rstrip("0")  # ``value_bytes``: those of its normalised form, "0" for zero
        return Decimal(value), (len(digits) + 1) // 2 + 1 if digits else 2
    stored = canonical(value)
    return stored, value_bytes(stored)


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
_CANONICAL, _SIZE, _LENGTH, _SCALAR = itemgetter(0), itemgetter(1), itemgetter(2), itemgetter(3)  # of ``_row``'s
_LIST, _DICT = {list}, {dict}


def _sized_list(values: list[Any]) -> tuple[list[Any], int]:
    """``canonical`` of a list and the size of the result (``value_bytes``)."""
    if values and type(values[0]) is dict and len(values) <= _MAP_LIST_LENGTH:  # the mark's ``changes``: at once
        return _sized_maps(values)
    if values and set(map(type, values)) == _LIST:  # a RUN# item's rows: from the last such list, by its bytes
        whole = _sized_rows(values)
        if whole is not None:
            return whole
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


# a list of maps by ``marshal.dumps(values, 0)`` (exact types, keys in order, content: as ``_MARSHALLED``) -> its
# canonical maps and its size: the ``MEMBERSHIP`` mark's ``changes``, put every minute with the same 16 entries,
# sized by one C call and one look-up instead of a look-up a map; a pure memo, bounded, shared by every run
_MAP_LISTS: dict[bytes, tuple[tuple[Item, ...], int]] = {}
_MAP_LISTS_KEPT = 1_000
_MAP_LIST_LENGTH = 64  # longer lists one map at a time: an entry's size stays small


def _sized_maps(values: list[Any]) -> tuple[list[Any], int]:
    """``_sized_list`` of a list that starts with a map: by ``_MAP_LISTS`` when its values are all maps of scalars
    marshal writes (a new map each time, as ``_sized_map``), else one value at a time: at once when the first map
    holds a list or a map (a ``RUN#`` item's ``steps``, a step's ``surge_baseline`` a group's instances), a list the
    memo never keeps, so never marshalled whole."""
    if not _ROW_SCALARS.issuperset(map(type, values[0].values())):
        return _each(values)
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


# The lists of rows sized last (``_sized_rows``), newest first, each as (its ``marshal.dumps(rows, 0)``, where each
# row's bytes start in it and its length last, each row's canonical values, each row's size, the list's size). In
# version 0 a list's bytes are a type byte and its length (``_HEAD``), then each element's own bytes one after the other
# (no references, no interning marks): a byte string equal to a slice of another is the same rows, of the same exact
# types, in the same order. Only lists of rows of scalars are kept. A kept row's canonical list is the one the items
# stored with it hold: the table never changes a stored item in place (``sim.dynamo``), and no caller gets such a list
# but a reader of a stored item, who must not change what it reads (``MemoryDynamo``'s ``copy_reads``).
_HEAD = 5
_LISTS_KEPT = 4
_LAST_ROWS: list[tuple[bytes, list[int], list[list[Any]], list[int], int]] = []


def _sized_rows(values: list[list[Any]]) -> tuple[list[Any], int] | None:
    """``canonical`` of a list of lists and its size (``value_bytes``), a new list of canonical rows (a row the list
    kept had is that list's, never one of ``values``: module comment above ``_LAST_ROWS``). The list's bytes
    (``marshal.dumps``: each value's exact type and content) are compared with those of a list sized before
    (``_LAST_ROWS``): the rows whose bytes lie before the first byte that differs, and those after the last, are
    that list's rows, only the rows in between worked out (``_row``); every row is when no list kept differs in
    fewer than half its rows (a run's first save in this process, or an item of another run). A refresh pass
    changes a row or two of a thousand. None when marshal refuses a value (a Decimal, a subclass): row by row then.

    Raises:
        TypeError: as ``canonical`` (a float).
    """
    try:
        code = dumps(values, 0)
    except ValueError:
        return None
    for at, last in enumerate(_LAST_ROWS):
        kept = _patched(values, code, last)
        if kept is not None:
            del _LAST_ROWS[at]
            break
    else:
        kept = _made(values, code)
    if kept[0]:
        _LAST_ROWS.insert(0, kept[1])
        del _LAST_ROWS[_LISTS_KEPT:]
    return list(kept[1][2]), kept[1][4]


Kept = tuple[bool, tuple[bytes, list[int], list[list[Any]], list[int], int]]


def _made(values: list[list[Any]], code: bytes) -> Kept:
    """Every row of ``values`` (marshalled whole as ``code``) worked out; whether it may be kept (rows of scalars,
    each row's bytes one after the other in ``code``) and the entry."""
    made = list(map(_row, values))
    sizes = list(map(_SIZE, made))
    starts = list(accumulate(map(_LENGTH, made), initial=_HEAD))
    keep = all(map(_SCALAR, made)) and starts[-1] == len(code)
    return keep, (code, starts, list(map(list, map(_CANONICAL, made))), sizes, 3 + len(values) + sum(sizes))


def _patched(
    values: list[list[Any]], code: bytes, last: tuple[bytes, list[int], list[list[Any]], list[int], int]
) -> Kept | None:
    """``_made``'s answer from ``last`` (a kept list) when the rows in which ``code`` differs from it are fewer than
    half (module comment above ``_LAST_ROWS``); None otherwise."""
    old, starts, rows, sizes, total = last
    n0, n1, size0, size1 = len(rows), len(values), len(old), len(code)
    if code == old:
        return True, last
    # the rows before the first byte that differs: the most rows whose bytes all lie in the bytes both begin with
    low, high = 0, min(n0, n1)
    while low < high:
        mid = (low + high + 1) // 2
        if code[_HEAD : starts[mid]] == old[_HEAD : starts[mid]]:
            low = mid
        else:
            high = mid - 1
    first = low
    # the rows after the last: from the first old row whose bytes and all after it end ``code`` too, past ``first``
    low, high = max(first, first + n0 - n1), n0
    while low < high:
        mid = (low + high) // 2
        tail = size0 - starts[mid]
        if size1 - tail >= starts[first] and code[size1 - tail :] == old[starts[mid] :]:
            high = mid
        else:
            low = mid + 1
    after, end = low, low + n1 - n0
    if (end - first) * 2 > n1:
        return None
    made = list(map(_row, values[first:end]))
    lengths = list(map(_LENGTH, made))
    delta = size1 - size0
    if starts[first] + sum(lengths) != starts[after] + delta:  # the rows between are not those bytes: not this list
        return None
    middle = list(map(_SIZE, made))
    shifted = starts[after:] if not delta else list(map(add, starts[after:], repeat(delta)))
    entry = (
        code,
        [*starts[:first], *accumulate(lengths[:-1], initial=starts[first]), *shifted]
        if made
        else [*starts[:first], *shifted],
        [*rows[:first], *map(list, map(_CANONICAL, made)), *rows[after:]],
        [*sizes[:first], *middle, *sizes[after:]],
        total - sum(sizes[first:after]) + sum(middle) + n1 - n0,
    )
    return all(map(_SCALAR, made)), entry


def _row(value: list[Any]) -> tuple[tuple[Any, ...], int, int, bool]:
    """A row's canonical values, their size (``_row_bytes``), the length of its ``marshal.dumps(value, 0)``, and
    whether it holds only scalars (``_MARSHALLED`` remembers such a row by those bytes).

    Raises:
        TypeError: as ``canonical``.
        ValueError: marshal refuses a value.
    """
    code = dumps(value, 0)
    sized = _MARSHALLED.get(code)
    if sized is not None:
        return sized[0], sized[1], len(code), True
    made = _canonical_row(value)
    scalar = _ROW_SCALARS.issuperset(map(type, value))
    if scalar:
        if len(_MARSHALLED) >= _ROWS_KEPT:
            _MARSHALLED.clear()
        _MARSHALLED[code] = (tuple(made), _row_bytes(made))
        return *_MARSHALLED[code], len(code), True
    return tuple(made), _row_bytes(made), len(code), False


# a map in a list by its items -> its values' types, its canonical form and its size (``value_bytes``): a pure memo,
# bounded, shared by every run, as ``_SIZED_ROWS``. An entry holds a map of string keys and scalar values only (the
# ``MEMBERSHIP`` mark's ``changes``, ``{"seq": n, "sk": "NODE#..."}``, put again every minute with the same entries)
# and answers only a map of the same value types: ``True``, ``1`` and ``Decimal(1)`` are equal in Python
_SIZED_MAPS: dict[tuple[tuple[Any, Any], ...], tuple[tuple[type, ...], Item, int]] = {}
_TEXT = {str}


def _sized_map(value: Item) -> tuple[Item, int]:
    """``canonical`` of a map in a list and its ``value_bytes``, a map of scalars remembered by its content (a new
    map each time: the table may change the one it stores).

    Raises:
        TypeError: as ``canonical`` (never from the memo: only maps ``canonical`` took are kept).
    """
    key = tuple(value.items())
    types = tuple(map(type, value.values()))
    known = None
    if _ROW_SCALARS.issuperset(types):  # else a list, a map or a set in it: never a map the memo holds
        with suppress(TypeError):  # a value that is not hashable (a signalling NaN): not known
            known = _SIZED_MAPS.get(key)
    if known is None or known[0] != types:
        stored, sizes = {}, []  # ``canonical(value)`` and ``value_bytes`` of it, a list of strings sized in C
        for name, field in value.items():
            if type(field) is list and field and set(map(type, field)) == _TEXT:  # a step's ``surge_baseline``
                text = "".join(field)
                stored[name] = list(field)
                sizes.append(3 + len(field) + (len(text) if text.isascii() else len(text.encode("utf-8"))))
            else:
                stored[name], size = sized_value(field)
                sizes.append(size)
        known = (types, stored, 3 + sum(1 + len(k.encode("utf-8")) + n for k, n in zip(stored, sizes, strict=True)))
        if _ROW_SCALARS.issuperset(types) and all(type(k) is str for k in value):
            if len(_SIZED_MAPS) >= _ROWS_KEPT:
                _SIZED_MAPS.clear()
            _SIZED_MAPS[key] = known
            return dict(stored), known[2]
        return stored, known[2]
    return dict(known[1]), known[2]
