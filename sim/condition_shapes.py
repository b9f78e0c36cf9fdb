"""The shape of a request's boto3 condition objects: what boto3's ``ConditionExpressionBuilder`` builds from them
apart from the values, so the in-memory DynamoDB builds each shape once (``sim.dynamo_calls``).

Follows the builder in boto3/dynamodb/conditions.py, which walks each condition depth first over
``condition.get_expression()["values"]``: a ``ConditionBase`` is built in its place (``Size`` included, though it is
also an attribute), an ``AttributeBase`` becomes one ``#nN`` per part of its name (``ATTR_NAME_REGEX``: the parts
between dots and brackets), and anything else becomes the next ``:vN``, or for a condition with
``has_grouped_values`` (``IN``) one ``:vN`` per element. One builder numbers the placeholders on across a request's
fields. The texts and the name placeholders are therefore fixed by the conditions' formats and operators, the
attribute names, and where the values sit and how many an ``IN`` has; the values only fill the ``:vN`` in walk order.

A shape is a flat tuple, in walk order: each field's name, then its tree in prefix form: a condition as
``(format, operator, has_grouped_values, number of parts)`` followed by its parts, an attribute as its name (``str``),
a value as ``None``, a grouped value as its length (``int``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from boto3.dynamodb.conditions import (
    And,
    AttributeBase,
    AttributeExists,
    AttributeNotExists,
    AttributeType,
    BeginsWith,
    Between,
    ConditionBase,
    Contains,
    Equals,
    GreaterThan,
    GreaterThanEquals,
    In,
    Key,
    LessThan,
    LessThanEquals,
    Not,
    NotEquals,
    Or,
    Size,
)

Shape = tuple[Any, ...]

# boto3's own condition classes: their get_expression() is ConditionBase's (the instance's format, operator and values)
_KNOWN = frozenset(
    {
        Equals, NotEquals, LessThan, LessThanEquals, GreaterThan, GreaterThanEquals, In, Between, BeginsWith,
        Contains, Size, AttributeType, AttributeExists, AttributeNotExists, And, Or, Not,
    }
)  # fmt: skip


class _Unknown(Exception):
    """Something the walk does not follow the builder through: boto3's builder answers instead."""


def shape(fields: Sequence[tuple[str, ConditionBase]]) -> tuple[Shape, list[Any]] | None:
    """The shape of a request's conditions ``(field, condition)`` in the builder's order (KeyConditionExpression a key
    condition) and their values in ``:vN`` order; None when the walk meets anything but boto3's own condition classes,
    attributes with ``str`` names (``Key`` only in a key condition), plain values, and ``IN`` lists or tuples.
    """
    key: list[Any] = []
    values: list[Any] = []
    try:
        for field, condition in fields:
            key.append(field)
            _walk(condition, field == "KeyConditionExpression", key, values)
    except _Unknown:
        return None
    return tuple(key), values


def _walk(condition: ConditionBase, is_key: bool, key: list[Any], values: list[Any]) -> None:
    """Append ``condition``'s shape to ``key`` and its values to ``values``, as ``_build_expression`` and
    ``_build_expression_component`` visit them."""
    if type(condition) not in _KNOWN:
        raise _Unknown
    parts = condition._values  # type: ignore[attr-defined]  # what its get_expression() gives the builder
    grouped = condition.has_grouped_values
    key.append((condition.expression_format, condition.expression_operator, grouped, len(parts)))
    for part in parts:
        if isinstance(part, ConditionBase):
            _walk(part, is_key, key, values)
        elif isinstance(part, AttributeBase):
            name = getattr(part, "name", None)
            if type(name) is not str or (is_key and not isinstance(part, Key)):
                raise _Unknown  # the builder raises (DynamoDBNeedsKeyConditionError, TypeError) or may
            key.append(name)
        elif grouped:
            if type(part) is not list and type(part) is not tuple:
                raise _Unknown  # the builder iterates it: a string's characters, a generator once
            key.append(len(part))
            values.extend(part)
        else:
            key.append(None)
            values.append(part)
