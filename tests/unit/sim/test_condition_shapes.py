"""The in-memory DynamoDB's memo of boto3's condition builder (``sim.condition_shapes``, ``sim.dynamo_calls``):
requests resolved through the memo give exactly what boto3's ``ConditionExpressionBuilder`` gives on every request
(texts, name placeholders, canonical values, in order), and raise exactly what it raises, for random condition trees
of every class boto3 has, Key and Attr, nested paths, attributes compared with attributes, and every kind of value.

Each example runs a request and a few variants of it through an empty memo: the same shape with other values, or one
part of the shape changed (a class, so its operator, a name, an attribute for a value, where a value sits, the length
of an IN list, the field). A memo key that left that part out answers the variant with the first request's text;
dropping any one of them from ``sim.condition_shapes``'s key fails this test (the format only in the last test:
boto3's classes that share a format differ in their operator).
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any
from unittest.mock import patch

import pytest
from boto3.dynamodb.conditions import (
    And,
    Attr,
    AttributeBase,
    AttributeExists,
    AttributeNotExists,
    AttributeType,
    BeginsWith,
    Between,
    ConditionBase,
    ConditionExpressionBuilder,
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
from boto3.dynamodb.types import Binary
from boto3.exceptions import DynamoDBNeedsKeyConditionError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim import dynamo_calls
from sim.dynamo_calls import RequestError, expressions

FIELDS = ("KeyConditionExpression", "ConditionExpression", "FilterExpression")
ONE_PART = (AttributeExists, AttributeNotExists)
TWO_PARTS = (
    Equals, NotEquals, LessThan, LessThanEquals, GreaterThan, GreaterThanEquals, BeginsWith, Contains, AttributeType,
)  # fmt: skip
# classes a variant may swap for one another
SAME_ARITY: tuple[tuple[type[ConditionBase], ...], ...] = ((*TWO_PARTS, In), ONE_PART, (And, Or))

accepted = st.one_of(
    st.sampled_from(["", "a", "ab", "RUN#1"]),
    st.integers(-3, 3),
    st.decimals(min_value=-10, max_value=10, places=1, allow_nan=False),
    st.booleans(),
    st.none(),
    st.sampled_from([b"", b"\x01", Binary(b"\x02"), {"a", "b"}, {1, 2}]),
)
refused = st.sampled_from([1.5, set(), object()])  # boto3's serializer raises (TypeError, ValueError)
scalars = st.integers(0, 30).flatmap(lambda n: refused if n == 0 else accepted)
values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from("xy"), inner), max_leaves=3
)
names = st.sampled_from(["pk", "sk", "a.b", "c[1]", "d.e[0].f"])


def operands_of(attributes: st.SearchStrategy[AttributeBase]) -> st.SearchStrategy[Any]:
    """What a condition compares an attribute with: a value, another attribute, a condition."""
    return st.one_of(values, values, attributes, st.builds(AttributeExists, attributes))


def in_lists_of(attributes: st.SearchStrategy[AttributeBase]) -> st.SearchStrategy[Any]:
    """What an IN is given: a list or a tuple of values (the builder iterates them), a string, an attribute."""
    return st.one_of(st.lists(values, max_size=3), st.tuples(values, values), st.just("ab"), attributes)


def trees(attributes: st.SearchStrategy[AttributeBase]) -> st.SearchStrategy[ConditionBase]:
    """Condition trees of every class boto3 has over ``attributes``, up to three leaves."""
    operands = operands_of(attributes)
    two_parts = st.sampled_from(TWO_PARTS)
    leaves = st.one_of(
        st.builds(lambda kind, attribute, value: kind(attribute, value), two_parts, attributes, operands),
        st.builds(Between, attributes, operands, operands),
        st.builds(In, attributes, in_lists_of(attributes)),
        st.builds(In, attributes, st.lists(values, max_size=3)),
        st.builds(lambda kind, attribute: kind(attribute), st.sampled_from(ONE_PART), attributes),
        st.builds(lambda kind, attribute, value: kind(Size(attribute), value), two_parts, attributes, operands),
    )
    nested = st.recursive(
        leaves,
        lambda inner: st.one_of(st.builds(And, inner, inner), st.builds(Or, inner, inner), st.builds(Not, inner)),
        max_leaves=3,
    )
    return st.one_of(leaves, nested)


attributes = st.builds(lambda kind, name: kind(name), st.sampled_from([Key, Attr]), names)
operands = operands_of(attributes)
in_lists = in_lists_of(attributes)
conditions = trees(attributes)
key_conditions = trees(st.builds(Key, names))  # an Attr in a key condition: the builder raises, no shape is kept
texts = st.sampled_from(["#n0 = :v0", "attribute_exists(#n1)", "pk = :v1", ":x = :x", "((("])


@st.composite
def requests(draw: st.DrawFn) -> dict[str, Any]:
    """One to three of the fields as conditions (or a text), sometimes names and values given, sometimes an update."""
    fields = draw(st.lists(st.sampled_from(FIELDS), min_size=1, max_size=3, unique=True))
    params: dict[str, Any] = {}
    for field in fields:
        keyed = field == "KeyConditionExpression" and draw(st.integers(0, 7)) > 0
        params[field] = draw(texts if draw(st.integers(0, 6)) == 0 else key_conditions if keyed else conditions)
    if draw(st.integers(0, 3)) == 0:
        params["ExpressionAttributeNames"] = draw(st.dictionaries(st.sampled_from(["#n0", "#n1", "#x"]), names))
    if draw(st.integers(0, 3)) == 0:
        params["ExpressionAttributeValues"] = draw(st.dictionaries(st.sampled_from([":v0", ":v1", ":x"]), values))
    if draw(st.integers(0, 3)) == 0:
        params["UpdateExpression"] = draw(st.sampled_from(["SET #n0 = :v0", "REMOVE x", "SET"]))
    return params


def variant(draw: st.DrawFn, condition: ConditionBase, change: bool) -> ConditionBase:
    """``condition`` again with other values, and if ``change`` one of its parts changed: another class of the same
    arity or its parts turned round, another attribute, an attribute for a value or a value for an attribute or
    a condition, an IN list of another length."""
    count = [0]
    chosen = draw(st.integers(0, parts(condition) - 1)) if change else -1

    def again(part: Any) -> Any:
        changed = count[0] == chosen
        count[0] += 1
        if isinstance(part, ConditionBase):
            kind, inside = type(part), part.get_expression()["values"]
            if isinstance(part, Size):
                return Size(draw(attributes) if changed else inside[0])
            if changed and draw(st.booleans()):
                kind = draw(st.sampled_from(next((s for s in SAME_ARITY if kind in s), (kind,))))
            elif changed:
                turn = draw(st.integers(1, max(1, len(inside) - 1)))
                inside = inside[turn:] + inside[:turn]  # a value before its attribute, an attribute after a value
            return kind(*[again(p) for p in inside])
        if isinstance(part, AttributeBase):
            return draw(operands) if changed else part
        if isinstance(part, list | tuple):
            fresh = type(part)([draw(values) for _ in part])
            return draw(st.one_of(in_lists, st.just(fresh[1:]), st.just([*fresh, draw(values)]))) if changed else fresh
        return draw(operands if changed else values)

    return again(condition)  # type: ignore[no-any-return]


def parts(part: Any) -> int:
    """How many parts ``variant`` visits in ``part``: itself and, for a condition, its parts'."""
    if isinstance(part, ConditionBase):
        return 1 + sum(parts(p) for p in part.get_expression()["values"])
    return 1


@st.composite
def batches(draw: st.DrawFn) -> list[tuple[dict[str, Any], bool]]:
    """A request and a few variants of it (in one of its fields at most, so that a variant differs from it in one
    part), each with or without an update."""
    first = draw(requests())
    batch = [first]
    for _ in range(draw(st.integers(2, 6))):
        changed = draw(st.sampled_from([None, *first]))  # the one field changed (None: only values change)
        params = {k: variant(draw, v, k == changed) if isinstance(v, ConditionBase) else v for k, v in first.items()}
        if draw(st.integers(0, 7)) == 0:  # the same conditions in other fields
            fields = [k for k in FIELDS if k in params]
            moved = draw(st.permutations(FIELDS))[: len(fields)]
            others = {k: v for k, v in params.items() if k not in FIELDS}
            params = others | dict(zip(moved, (params[f] for f in fields), strict=True))
        batch.append(params)
    return [(params, draw(st.booleans())) for params in batch]


def answer(call: Callable[[], Any]) -> Any:
    """What a call answers (texts, placeholders in order, values with their types, the parsed update) or raises
    (class and code and message)."""
    try:
        got = call()
    except RequestError as err:
        return ("RequestError", err.code, err.message)
    except Exception as err:  # noqa: BLE001  # any exception: the memo must raise what boto3's builder path raises
        return (type(err).__name__, str(err))
    if isinstance(got, dynamo_calls.Expressions):
        return (got.key_condition, got.condition, got.filter, typed(got.names), typed(got.values), got.update)
    return got


def answers(params: dict[str, Any], update: bool) -> Any:
    """What the request's conditions build to, and what the request resolves to."""
    return (answer(lambda: built(params)), answer(lambda: expressions(params, update)))


def built(params: dict[str, Any]) -> Any:
    """The request's conditions built (``_built``): texts, name placeholders, values, in order."""
    conditions = [(field, params[field]) for field in FIELDS if isinstance(params.get(field), ConditionBase)]
    names: dict[str, str] = {}
    values: dict[str, Any] = {}
    texts = dynamo_calls._built(conditions, names, values)
    return (texts, typed(names), typed(values))


def typed(value: Any) -> Any:
    """``value`` with every part's type, in order: ``1``, ``True`` and ``Decimal(1)`` compare equal in Python."""
    if isinstance(value, dict):
        return ("dict", [(k, typed(v)) for k, v in value.items()])
    if isinstance(value, list | tuple):
        return (type(value).__name__, [typed(v) for v in value])
    if isinstance(value, set | frozenset):
        return ("set", sorted(repr(typed(v)) for v in value))
    return (type(value).__name__, repr(value))


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches())
def test_the_memo_answers_what_boto3s_builder_answers(batch: list[tuple[dict[str, Any], bool]]) -> None:
    """Each request through the memo (a small one, so it is also cleared) against boto3's builder on the request."""
    with (
        patch.dict(dynamo_calls._BUILT, clear=True),
        patch.dict(dynamo_calls._CHECKED, clear=True),
        patch.object(dynamo_calls, "_BUILT_KEPT", 4),
    ):
        for params, update in batch:
            with patch.object(dynamo_calls, "shape", return_value=None):  # the walk recognises nothing: the builder
                expected = answers(params, update)
            assert answers(params, update) == expected


def test_a_shape_built_before_is_not_built_again() -> None:
    """A second request of the same shape, other values, is answered without the builder, its values in place."""
    calls = []
    real = ConditionExpressionBuilder.build_expression

    def counted(self: ConditionExpressionBuilder, condition: ConditionBase, is_key_condition: bool = False) -> Any:
        calls.append(condition)
        return real(self, condition, is_key_condition=is_key_condition)

    def request(node: str, first: str, states: list[str]) -> dict[str, Any]:
        return {
            "KeyConditionExpression": Key("pk").eq(node) & Key("sk").begins_with(first),
            "FilterExpression": Attr("state").is_in(states) & ~Attr("m.l[2]").size().gt(Decimal(1)),
        }

    with (
        patch.dict(dynamo_calls._BUILT, clear=True),
        patch.dict(dynamo_calls._CHECKED, clear=True),
        patch.object(ConditionExpressionBuilder, "build_expression", counted),
    ):
        expressions(request("NODE#1", "RUN#", ["a", "b"]))
        assert len(calls) == 2
        got = expressions(request("NODE#2", "JOB#", ["c", "d"]))
        assert len(calls) == 2
        expressions(request("NODE#2", "JOB#", ["c", "d", "e"]))  # an IN list of another length: another shape
        assert len(calls) == 4
    assert got.key_condition == "(#n0 = :v0 AND begins_with(#n1, :v1))"
    assert got.filter == "(#n2 IN (:v2, :v3) AND (NOT size(#n3.#n4[2]) > :v4))"
    assert got.names == {"#n0": "pk", "#n1": "sk", "#n2": "state", "#n3": "m", "#n4": "l"}
    assert got.values == {":v0": "NODE#2", ":v1": "JOB#", ":v2": "c", ":v3": "d", ":v4": Decimal(1)}


class Starts(BeginsWith):
    """A condition class of the product's own: the walk does not know what its builder call reads."""

    def get_expression(self) -> Any:
        return {**super().get_expression(), "operator": "starts"}


def test_what_the_walk_does_not_know_is_built_by_boto3() -> None:
    """A class of one's own, an instance's own format or operator, a key condition on an Attr, an IN of a string."""
    odd = Equals(Attr("a"), 1)
    odd.expression_format = "{operator}({0}, {1})"  # type: ignore[assignment]  # boto3-stubs: a Literal
    requests: list[tuple[dict[str, Any], str]] = [
        ({"ConditionExpression": Starts(Attr("a"), "x")}, "starts(#n0, :v0)"),
        ({"ConditionExpression": BeginsWith(Attr("a"), "x")}, "begins_with(#n0, :v0)"),
        ({"ConditionExpression": odd}, "=(#n0, :v0)"),
        ({"ConditionExpression": Equals(Attr("a"), 1)}, "#n0 = :v0"),
        ({"ConditionExpression": Attr("a").is_in("xy")}, "#n0 IN (:v0, :v1)"),
    ]
    with patch.dict(dynamo_calls._BUILT, clear=True), patch.dict(dynamo_calls._CHECKED, clear=True):
        for params, text in requests:
            assert built(params)[0] == {"ConditionExpression": text}
        with pytest.raises(DynamoDBNeedsKeyConditionError):
            built({"KeyConditionExpression": Attr("pk").eq(1)})
