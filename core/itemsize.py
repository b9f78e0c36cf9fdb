"""The size of a DynamoDB item, counted the way DynamoDB counts it. Pure.

DynamoDB Developer Guide, "DynamoDB item sizes and formats": an item's size is the sum of its attribute names'
UTF-8 bytes and its values' sizes; a string is its UTF-8 bytes, a binary its raw bytes, a number about one byte per
two significant digits plus one (leading and trailing zeroes trimmed), a null or Boolean one byte; a list or map
costs 3 bytes plus one byte per element, plus its elements (a map's also their names). An item is at most
``DYNAMODB_ITEM_LIMIT_BYTES`` ("Service, account, and table quotas in Amazon DynamoDB": 400 KB, and "All size
measurements in DynamoDB use binary-based units": 1 KB = 1,024 bytes), key attributes included.

The number rule is the guide's approximation; ``item_bytes`` rounds it up (an odd digit count costs a whole byte),
so a size it reports under a limit is under DynamoDB's count too, within a few bytes per number.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

DYNAMODB_ITEM_LIMIT_BYTES = 400 * 1024


def _number_bytes(value: int | float | Decimal) -> int:
    if type(value) is int:  # most numbers of an item: its significant digits without a Decimal
        digits = len(str(abs(value)).rstrip("0")) or 1
        return (digits + 1) // 2 + 1
    number = value if isinstance(value, Decimal) else Decimal(str(value))
    count = len(number.normalize().as_tuple().digits) if number else 1
    return (count + 1) // 2 + 1


def value_bytes(value: Any) -> int:
    """The size of one attribute value (without its name).

    Args:
        value: a plain value as boto3's resource layer takes it (str, int, float, Decimal, bool, None, bytes,
            list/tuple, dict, set).

    Raises:
        TypeError: a value DynamoDB cannot store.
    """
    kind = type(value)
    if kind is str:
        return len(value.encode("utf-8")) if not value.isascii() else len(value)
    if kind is int:
        return _number_bytes(value)
    if kind is list:
        return _list_bytes(value)
    if isinstance(value, bool) or value is None:
        return 1
    if isinstance(value, str):
        return len(value.encode("utf-8"))
    if isinstance(value, (int, float, Decimal)):
        return _number_bytes(value)
    if isinstance(value, (bytes, bytearray)):
        return len(value)
    if isinstance(value, Mapping):
        return 3 + sum(1 + len(str(k).encode("utf-8")) + value_bytes(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return 3 + sum(1 + value_bytes(v) for v in value)
    if isinstance(value, (set, frozenset)):
        return sum(value_bytes(v) for v in value)
    raise TypeError(f"not a DynamoDB value: {type(value).__name__}")


def _list_bytes(values: list[Any]) -> int:
    """A list's size: ``value_bytes``'s, its strings and ints counted here rather than in a call each (a 1,000-step
    ``RUN#`` item's rows hold 15,000 of them), and a list in it that holds only such scalars (a row) sized once for
    its content (``row_bytes``); one of strings only (a step in flight's ``surge_baseline``: a group's instance ids,
    hundreds) by one join, in C: the UTF-8 size of the joined text is the sum of its strings'."""
    if set(map(type, values)) == _TEXT:
        text = "".join(values)
        return 3 + len(values) + (len(text) if text.isascii() else len(text.encode("utf-8")))
    total = 3 + len(values)
    for v in values:
        kind = type(v)
        if kind is str:
            total += len(v) if v.isascii() else len(v.encode("utf-8"))
        elif kind is int:
            total += ((len(str(abs(v)).rstrip("0")) or 1) + 1) // 2 + 1
        elif kind is list:
            total += row_bytes(v)
        else:
            total += value_bytes(v)
    return total


_TEXT = {str}  # the element types of a list of strings only
# a row's content (its values and their exact types: ``True`` costs 1 byte, ``1`` 2) -> its size
_ROWS: dict[tuple[tuple[Any, ...], tuple[type, ...]], int] = {}
MEMO_ROWS = 50_000  # the most row sizes kept before the memo starts again (a few runs of a few thousand steps)
_SCALARS = frozenset((str, int, bool, type(None)))


def row_bytes(values: list[Any]) -> int:
    """A list's size (``value_bytes``'s, bytes); one of scalars only (str, int, bool, None: a ``RUN#`` row,
    ``core.runrecord``) is counted once for its content and remembered, since a large run's rows repeat from one
    save to the next. Keyed by the values and their exact types, so the same content always gives the same size."""
    types = tuple(map(type, values))
    if not _SCALARS.issuperset(types):
        return _list_bytes(values)
    key = (tuple(values), types)
    size = _ROWS.get(key)
    if size is None:
        size = _list_bytes(values)
        if len(_ROWS) >= MEMO_ROWS:
            _ROWS.clear()
        _ROWS[key] = size
    return size


def item_bytes(item: Mapping[str, Any]) -> int:
    """An item's size in bytes: each attribute's name (UTF-8) plus its value (``value_bytes``).

    >>> item_bytes({"pk": "CLUSTER#c", "n": 12345, "l": ["ab", None]})
    25
    """
    return sum(len(k.encode("utf-8")) + value_bytes(v) for k, v in item.items())
