"""Query's key condition for the in-memory table: which sort keys of which partition a Query reads, in order.

Follows the DynamoDB Developer Guide, "Query operations in DynamoDB", "Key condition expressions for query": the
partition key by equality (``pk = :v``) and optionally, joined by AND, one sort key condition ``sk = | < | <= | > |
>= :v``, ``sk BETWEEN :a AND :b`` or ``begins_with(sk, :p)``; anything else is refused (``ValidationException``).
Sort keys are strings, ordered by UTF-8 bytes (Python's code point order); ``ScanIndexForward=False`` reverses;
``ExclusiveStartKey`` resumes after the key it names.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sim.dynamo_calls import Expressions, validation
from sim.expression_syntax import Context, Operand, Path, Value
from sim.expressions import And, Between, Compare, Condition, Function, parse_condition

if TYPE_CHECKING:
    from sim.dynamo import MemoryTable

WHAT = "KeyConditionExpression"


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
    """(the partition key value, the sort key condition or None)."""
    parts: list[Condition] = []

    def flatten(c: Condition) -> None:
        if isinstance(c, And):
            flatten(c.left)
            flatten(c.right)
        else:
            parts.append(c)

    flatten(condition)
    pk_value: str | None = None
    sk_condition: Condition | None = None
    for part in parts:
        subject = part.left if isinstance(part, Compare) else None
        if isinstance(part, (Between, Function)):
            subject = part.operand if isinstance(part, Between) else part.args[0]
        name = _attribute(subject, ctx) if subject is not None else None
        if name == keys[0] and isinstance(part, Compare) and part.op == "=" and pk_value is None:
            pk_value = _string(part.right, ctx)
        elif name == keys[1] and sk_condition is None and _sort_key_form(part):
            sk_condition = part
        else:
            raise validation(f"Invalid {WHAT}: Query key condition not supported")
    if pk_value is None:
        raise validation(f"Query condition missed key schema element: {keys[0]}")
    return pk_value, sk_condition


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


def key_range(table: MemoryTable, exprs: Expressions, params: Mapping[str, Any]) -> tuple[str, list[str]]:
    """(partition key, the sort keys the Query reads in order) for a request's key condition.

    Raises:
        RequestError: ValidationException (a condition DynamoDB does not accept as a key condition, a bad
            ExclusiveStartKey).
    """
    assert exprs.key_condition is not None  # the caller checked
    ctx = Context({}, exprs.names, exprs.values)
    pk, sk_condition = _split(parse_condition(exprs.key_condition, WHAT).condition, ctx, table.keys)
    order = table.sort_keys(pk)
    lo, hi = _bounds(order, sk_condition, ctx)
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
    return pk, keys
