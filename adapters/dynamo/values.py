"""Values between DynamoDB and plain Python (boto3's resource layer answers numbers as ``Decimal`` and refuses
``float``: "Boto3 DynamoDB types"). Pure."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

# values ``plain`` leaves as they are, known by their exact type (no call per string of an item)
_AS_IS = frozenset({str, bool, int, float, type(None), bytes})


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
        return [v if type(v) in _AS_IS else plain(v) for v in value]
    return value


def dynamo(value: Any) -> Any:
    """Plain Python to DynamoDB values (float → Decimal; None values dropped from maps)."""
    if isinstance(value, float):
        return Decimal(str(value))
    if isinstance(value, dict):
        return {k: dynamo(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [dynamo(v) for v in value]
    return value
