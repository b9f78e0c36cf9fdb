"""Query's key condition for the in-memory table: which sort keys of which partition a Query reads, in order.

Follows the DynamoDB Developer Guide, "Query operations in DynamoDB", "Key condition expressions for query": the
partition key by equality (``pk = :v``) and optionally, joined by AND, one sort key condition ``sk = | < | <= | > |
>= :v``, ``sk BETWEEN :a AND :b`` or ``begins_with(sk, :p)``; anything else is refused (``ValidationException``).
Sort keys are strings, ordered by UTF-8 bytes (Python's code point order); ``ScanIndexForward=False`` reverses;
``ExclusiveStartKey`` resumes after the key it names.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from sim.dynamo_calls import Expressions, RequestError, validation
from sim.expression_syntax import Context, ExpressionError, Operand, Path, Value
from sim.expressions import And, Between, Compare, Condition, Function, parse_condition
from sim.values import canonical, type_of

if TYPE_CHECKING:
    from sim.dynamo import MemoryTable

WHAT = "KeyConditionExpression"
T = TypeVar("T")


def sort_key_group(sk: str) -> str:
    """A sort key's group: the key up to its first ``#`` (``NODE#``, ``RUN#``), or the whole key without one. Every
    string between two keys of one group (in code point order) starts with the group, so is of it: a range of keys
    whose first and last share a group lies in it; and the group of any string between two keys lies between theirs
    (it is a prefix of the string, up to a ``#`` that no shorter common prefix holds), so a range's keys are in the
    groups between its ends' (``MemoryTable``'s page bound by group; ``tests/unit/sim/test_dynamo_pages.py``)."""
    return sk[: sk.find("#") + 1] or sk


def key_of(keys: tuple[str, str], key: Mapping[str, Any], exact: bool = True) -> tuple[str, str]:
    """(pk, sk) of a ``Key`` (exactly the two key attributes ``keys``) or an item (``exact=False``).

    Raises:
        RequestError: ValidationException, as DynamoDB words it.
    """
    if exact and set(key) != set(keys):
        raise validation("The provided key element does not match the schema")
    out = []
    for attribute in keys:
        if attribute not in key:
            raise validation(f"One or more parameter values were invalid: Missing the key {attribute} in the item")
        value = canonical(key[attribute])
        if not isinstance(value, str):
            raise validation(
                f"One or more parameter values were invalid: Type mismatch for key {attribute} expected: S "
                f"actual: {type_of(value)}"
            )
        if not value:
            raise validation(
                "One or more parameter values are not valid. The AttributeValue for a key attribute cannot "
                f"contain an empty string value. Key: {attribute}"
            )
        out.append(value)
    return out[0], out[1]


def _attribute(operand: Operand, ctx: Context) -> str | None:
    if isinstance(operand, Path) and len(operand.parts) == 1:
        return ctx.name(str(operand.parts[0]))
    return None


def _string(operand: Operand, ctx: Context) -> str:
    value = operand.value(ctx) if isinstance(operand, Value) else None
    if not isinstance(value, str):
        raise validation(
            "One or more parameter values were invalid: Condition parameter type does not match schema type"
        )
    return value


def _split(condition: Condition, ctx: Context, keys: tuple[str, str]) -> tuple[str, Condition | None]:
    """(the partition key value, the sort key condition or None): the general path (``_split_of`` memoizes)."""
    return _parts(condition, ctx, keys, lambda operand: _string(operand, ctx))


def _parts(
    condition: Condition, ctx: Context, keys: tuple[str, str], read: Callable[[Operand], T]
) -> tuple[T, Condition | None]:
    """(``read`` of the partition key value's operand, the sort key condition or None), each part judged in order.

    Raises:
        RequestError: ValidationException, a part that is neither (or a key twice), or no partition key.
        ExpressionError: an undefined ``#name``.
    """
    pk: T | None = None
    sk_condition: Condition | None = None
    for part in _flat(condition):
        subject = part.left if isinstance(part, Compare) else None
        if isinstance(part, (Between, Function)):
            subject = part.operand if isinstance(part, Between) else part.args[0]
        name = _attribute(subject, ctx) if subject is not None else None
        if name == keys[0] and isinstance(part, Compare) and part.op == "=" and pk is None:
            pk = read(part.right)
        elif name == keys[1] and sk_condition is None and _sort_key_form(part):
            sk_condition = part
        else:
            raise validation(f"Invalid {WHAT}: Query key condition not supported")
    if pk is None:
        raise validation(f"Query condition missed key schema element: {keys[0]}")
    return pk, sk_condition


def _flat(condition: Condition) -> list[Condition]:
    """The conditions an AND tree joins, left to right."""
    parts: list[Condition] = []

    def flatten(c: Condition) -> None:
        if isinstance(c, And):
            flatten(c.left)
            flatten(c.right)
        else:
            parts.append(c)

    flatten(condition)
    return parts


# (key condition text, the table's keys, the request's names in order) -> (the operand of the partition key's value,
# the sort key condition or None); bounded: cleared when full (a week's Queries have a handful of key conditions)
_SHAPES: dict[tuple[str, tuple[str, str], tuple[tuple[str, str], ...]], tuple[Operand, Condition | None]] = {}
_SHAPES_MAX = 1024


def _split_of(text: str, ctx: Context, keys: tuple[str, str]) -> tuple[str, Condition | None]:
    """``_split`` of the parsed ``text``, its shape memoized: which part is the partition key's equality and which
    the sort key's condition depends on the text, the table's key names and the request's ``#name`` placeholders
    only, never on the values, so it is kept by those (a pure result: the parse is ``parse_condition``'s, the same
    objects for the same text). Only a shape ``_split`` accepts whatever the values are is kept; its one check of a
    value, the partition key's being a string, is made each call. Any other shape (an error whatever the values)
    takes ``_split`` itself, which raises as before. ``tests/unit/sim/test_dynamo_keys.py`` compares the two.
    """
    memo = (text, keys, tuple(ctx.names.items()))
    shape = _SHAPES.get(memo)
    if shape is None:
        condition = parse_condition(text, WHAT).condition
        found = _shape(condition, ctx, keys)
        if found is None:
            return _split(condition, ctx, keys)
        if len(_SHAPES) >= _SHAPES_MAX:
            _SHAPES.clear()
        shape = _SHAPES[memo] = found
    return _string(shape[0], ctx), shape[1]


def _shape(condition: Condition, ctx: Context, keys: tuple[str, str]) -> tuple[Operand, Condition | None] | None:
    """What ``_split`` finds without reading a value: (the partition key value's operand, the sort key condition),
    or None where ``_split`` raises whatever the values are (or a name is undefined)."""
    try:
        return _parts(condition, ctx, keys, lambda operand: operand)
    except (RequestError, ExpressionError):
        return None


def _sort_key_form(part: Condition) -> bool:
    if isinstance(part, Compare):
        return part.op != "<>" and isinstance(part.right, Value)
    if isinstance(part, Between):
        return isinstance(part.low, Value) and isinstance(part.high, Value)
    return isinstance(part, Function) and part.name == "begins_with" and isinstance(part.args[1], Value)


def _bounds(order: list[str], condition: Condition | None, ctx: Context) -> tuple[int, int]:
    n = len(order)
    if condition is None:
        return 0, n
    if isinstance(condition, Compare):
        v = _string(condition.right, ctx)
        return {
            "=": (bisect_left(order, v), bisect_right(order, v)),
            "<": (0, bisect_left(order, v)),
            "<=": (0, bisect_right(order, v)),
            ">": (bisect_right(order, v), n),
            ">=": (bisect_left(order, v), n),
        }[condition.op]
    if isinstance(condition, Between):
        low, high = _string(condition.low, ctx), _string(condition.high, ctx)
        if low > high:
            raise validation(
                f"Invalid {WHAT}: The BETWEEN operator requires upper bound to be greater than or equal to lower "
                f"bound; lower bound operand: {low}, upper bound operand: {high}"
            )
        return bisect_left(order, low), bisect_right(order, high)
    assert isinstance(condition, Function)  # _sort_key_form admitted begins_with only
    prefix = _string(condition.args[1], ctx)
    lo = bisect_left(order, prefix)
    if prefix and prefix[-1] < _LAST:  # the keys with the prefix end before the prefix with its last character + 1
        return lo, bisect_left(order, prefix[:-1] + chr(ord(prefix[-1]) + 1), lo)
    hi = lo
    while hi < n and order[hi].startswith(prefix):
        hi += 1
    return lo, hi


_LAST = chr(0x10FFFF)  # the greatest code point: a prefix ending in it has no next string of its length


def _group(condition: Condition | None, ctx: Context) -> str | None:
    """The sort key group (``sort_key_group``) of every key the sort key ``condition`` admits, or None when the keys
    it admits may be of any group: ``= v`` admits ``v`` alone; ``begins_with`` a prefix holding a ``#``, keys that
    start with the prefix's group; ``BETWEEN`` two keys of one group, keys of it (``sort_key_group``)."""
    if isinstance(condition, Compare):
        return sort_key_group(_string(condition.right, ctx)) if condition.op == "=" else None
    if isinstance(condition, Between):
        group = sort_key_group(_string(condition.low, ctx))
        return group if group == sort_key_group(_string(condition.high, ctx)) else None
    if isinstance(condition, Function):
        prefix = _string(condition.args[1], ctx)
        return sort_key_group(prefix) if "#" in prefix else None
    return None


def key_range(table: MemoryTable, exprs: Expressions, params: Mapping[str, Any]) -> tuple[str, list[str], str | None]:
    """(partition key, the sort keys the Query reads in order, the sort key group they all lie in whatever keys the
    partition holds, or None when they may be of any) for a request's key condition.

    Raises:
        RequestError: ValidationException (a condition DynamoDB does not accept as a key condition, a bad
            ExclusiveStartKey).
    """
    assert exprs.key_condition is not None  # the caller checked
    ctx = Context({}, exprs.names, exprs.values)
    pk, sk_condition = _split_of(exprs.key_condition, ctx, table.keys)
    order = table.sort_keys(pk)
    lo, hi = _bounds(order, sk_condition, ctx)
    group = _group(sk_condition, ctx)
    keys = order[lo:hi]
    forward = params.get("ScanIndexForward", True)
    if not forward:
        keys.reverse()
    start = params.get("ExclusiveStartKey")
    if start is not None:
        start_pk, start_sk = table.key_of(start)
        if start_pk != pk:
            raise validation("The provided starting key is invalid: The provided key element does not match the schema")
        keys = [k for k in keys if (k > start_sk if forward else k < start_sk)]
    return pk, keys, group
