"""Values between DynamoDB and plain Python (boto3's resource layer answers numbers as ``Decimal`` and refuses
``float``: "Boto3 DynamoDB types"). Pure."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from decimal import Decimal
from typing import Any

# values ``plain`` leaves as they are, known by their exact type (no call per string of an item)
_AS_IS = frozenset({str, bool, int, float, type(None), bytes})
# values ``dynamo`` sends as they are (no call per element of a list or a map)
_KEPT = frozenset({str, bool, int, type(None), bytes, Decimal})


def plain(value: Any) -> Any:
    """DynamoDB values back to plain Python (Decimal → int or float)."""
    if type(value) is dict:  # an item: copied at once, only its numbers, lists and maps converted
        out = dict(value)
        for key, inner in value.items():
            if type(inner) not in _AS_IS:
                out[key] = plain(inner)
        return out
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        if _AS_IS.issuperset(map(type, value)):  # nothing to convert (a step's ``surge_baseline``, hundreds): in C
            return list(value)
        # a list's numbers converted here, not in a call each (a 1,000-step ``RUN#`` item's rows hold 10,000)
        return [
            v
            if type(v) in _AS_IS
            else (int(v) if v == v.to_integral_value() else float(v))
            if type(v) is Decimal
            else _plain_row(v)
            if type(v) is list
            else plain(v)
            for v in value
        ]
    return value


def plain_item(item: Mapping[str, Any], as_is: Collection[str]) -> dict[str, Any]:
    """``plain`` of an item but for the attributes named in ``as_is``, left as the table answered them (numbers as
    ``Decimal``, shared with the answer: read them, never change them), for a reader that converts what it reads of
    them itself: ``core.rowread.unpack`` reads a ``RUN#`` item's rows with ``int()``, and a 1,000-step run's rows were
    converted here row by row on every read (``_plain_row``), then read again by it."""
    out: dict[str, Any] = plain({k: v for k, v in item.items() if k not in as_is})
    for name in as_is:
        if name in item:
            out[name] = item[name]
    return out


# a row's content as answered (its values and their exact types: ``Decimal(1)`` and ``True`` are equal in Python)
# -> its plain values. Kept in the module, not in an execution environment's ``Deps`` (as the refresher's
# ``GatherMemo`` is): a pure function's memo keyed by the whole content, never by a last read, so it answers the
# same whichever reader, environment or run filled it: sharing it in one process changes no answer (at most which
# rows its bound keeps)
_ROWS: dict[tuple[tuple[Any, ...], tuple[type, ...]], tuple[Any, ...]] = {}
MEMO_ROWS = 50_000  # the most rows kept before the memo starts again (a few runs of a few thousand steps)
_ROW_SCALARS = frozenset({str, bool, int, type(None), Decimal})


def _plain_row(values: list[Any]) -> list[Any]:
    """``plain`` of a list in a list: one of scalars only (a ``RUN#`` row, ``core.runrecord``) converted once for
    its content and remembered (a large run's rows repeat from one read to the next), a new list each time."""
    types = tuple(map(type, values))
    if not _ROW_SCALARS.issuperset(types):
        return plain(values)  # type: ignore[no-any-return]
    key = (tuple(values), types)
    row = _ROWS.get(key)
    if row is None:
        row = tuple(plain(values))
        if len(_ROWS) >= MEMO_ROWS:
            _ROWS.clear()
        _ROWS[key] = row
    return list(row)


def dynamo(value: Any) -> Any:
    """Plain Python to DynamoDB values (float → Decimal; None values dropped from maps)."""
    if isinstance(value, float):
        return Decimal(str(value))
    if isinstance(value, dict):
        return {k: v if type(v) in _KEPT else dynamo(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        if _KEPT.issuperset(map(type, value)):  # nothing to convert (a step's ``surge_baseline``): copied in C
            return list(value)
        return [v if type(v) in _KEPT else dynamo(v) for v in value]
    return value


def dynamo_item(item: Mapping[str, Any], as_is: Collection[str] = ()) -> dict[str, Any]:
    """``dynamo`` of an item (its None attributes left out), but the attributes named in ``as_is`` sent as they
    are: values that are DynamoDB's already (no float anywhere, no None in a map: a ``RUN#`` item's rows, lists of
    str, int, bool and None, ``core.runrecord``), not copied element by element on every write."""
    return {k: v if type(v) in _KEPT or k in as_is else dynamo(v) for k, v in item.items() if v is not None}
