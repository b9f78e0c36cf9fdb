"""The condition expression evaluator (``sim.expressions``) against the DynamoDB Developer Guide's "Comparison
operator and function reference": comparisons, AND/OR/NOT and their precedence, functions, IN, BETWEEN, nested
parentheses and paths, missing attributes, and the expressions DynamoDB refuses."""

from decimal import Decimal
from typing import Any

import pytest
from boto3.dynamodb.conditions import Attr, ConditionExpressionBuilder
from boto3.dynamodb.types import Binary
from hypothesis import given
from hypothesis import strategies as st

from sim import dynamo_calls
from sim.expressions import EvaluationError, ExpressionError, evaluate, parse_condition
from sim.values import canonical

ITEM: dict[str, Any] = canonical(
    {
        "n": 5,
        "s": "abc",
        "b": True,
        "z": None,
        "bin": Binary(b"\x01\x02\x03"),
        "l": [1, "two", {"three": 3}],
        "m": {"k": "v", "deep": {"x": 1}, "lst": [10, 20]},
        "ss": {"a", "b"},
        "ns": {1, 2},
        "empty": "",
        "status": "running",
    }
)
VALUES: dict[str, Any] = canonical(
    {":1": 1, ":5": 5, ":6": 6, ":abc": "abc", ":a": "a", ":ab": "ab", ":b": "b", ":true": True, ":s": "S", ":n": "N"}
)
NAMES = {"#s": "status", "#n": "n", "#m": "m"}


def holds(text: str, item: dict[str, Any] | None = None) -> bool:
    return evaluate(text, ITEM if item is None else item, NAMES, VALUES)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("n = :5", True),
        ("n <> :5", False),
        ("n < :6", True),
        ("n <= :5", True),
        ("n > :5", False),
        ("n >= :6", False),
        ("s > :ab", True),  # strings by code point (UTF-8 byte) order
        ("s < :b", True),
        ("n = :abc", False),  # different types are never equal
        ("n <> :abc", True),
        ("s > :1", False),  # nor ordered
        ("b = :true", True),
        ("#n = :5", True),
        ("#s = :abc", False),
        ("m.k = :a", False),
        ("m.deep.x = :1", True),
        ("#m.#n = :1", False),  # m has no attribute n
        ("l[2].three = :1", False),
        ("m.lst[1] > :5", True),
        ("l[9] = :1", False),
    ],
)
def test_comparisons(text: str, expected: bool) -> None:
    assert holds(text) is expected


def test_missing_attributes_compare_false_except_not_equal() -> None:
    assert not holds("absent = :1") and not holds("absent < :1") and not holds("absent >= :1")
    assert holds("absent <> :1") and holds("absent.deeper[0] <> :1")
    assert not holds("absent BETWEEN :1 AND :5") and not holds("absent IN (:1, :5)")
    assert holds("n = :5", {}) is False  # no item at all: every attribute is missing
    assert holds("attribute_not_exists(pk)", {}) is True


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("n = :5 AND s = :abc", True),
        ("n = :5 AND s = :a", False),
        ("n = :1 OR s = :abc", True),
        ("NOT n = :1", True),
        ("not n = :5", False),  # keywords are case insensitive
        ("n = :1 OR n = :5 AND s = :a", False),  # AND binds tighter: n = :1 OR (n = :5 AND s = :a)
        ("n = :5 OR n = :1 AND s = :a", True),  # n = :5 OR (n = :1 AND s = :a), not (... OR ...) AND s = :a
        ("(n = :1 OR n = :5) AND s = :abc", True),
        ("NOT n = :1 AND n = :1", False),  # NOT binds tighter than AND
        ("NOT (n = :1 AND n = :1)", True),
        ("((((n = :5))))", True),
        ("(n = :1 OR (s = :abc AND (NOT b = :true OR n BETWEEN :1 AND :5)))", True),
        ("NOT NOT n = :5", True),
    ],
)
def test_logic_and_precedence(text: str, expected: bool) -> None:
    assert holds(text) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("attribute_exists(n)", True),
        ("attribute_exists(z)", True),  # NULL is a value
        ("attribute_exists(m.deep.x)", True),
        ("attribute_exists(m.deep.y)", False),
        ("attribute_not_exists(absent)", True),
        ("attribute_not_exists(#s)", False),
        ("attribute_type(n, :n)", True),
        ("attribute_type(s, :n)", False),
        ("attribute_type(s, :s)", True),
        ("begins_with(s, :ab)", True),
        ("begins_with(s, :b)", False),
        ("begins_with(n, :ab)", False),  # not a string
        ("contains(s, :b)", True),
        ("contains(ss, :a)", True),
        ("contains(ss, :abc)", False),
        ("contains(ns, :1)", True),
        ("contains(l, :1)", True),
        ("contains(n, :1)", False),
        ("size(s) = :6", False),
        ("size(s) < :5", True),
        ("size(l) BETWEEN :1 AND :5", True),
        ("size(m) = :1", False),
        ("size(n) = :1", False),  # a number has no size
        ("size(absent) <> :1", True),
        ("n BETWEEN :1 AND :5", True),
        ("n BETWEEN :6 AND :6", False),
        ("s BETWEEN :a AND :b", True),
        ("n IN (:1, :5)", True),
        ("n IN (:1, :6)", False),
        ("n in (:5)", True),
    ],
)
def test_functions_in_and_between(text: str, expected: bool) -> None:
    assert holds(text) is expected


def test_binary_values() -> None:
    values = canonical({":p": Binary(b"\x01\x02"), ":q": Binary(b"\x02"), ":big": Binary(b"\x09")})
    assert evaluate("begins_with(bin, :p) AND contains(bin, :q) AND bin < :big", ITEM, {}, values)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "n =",
        "n = :5 AND",
        "(n = :5",
        "n = :5)",
        "n == :5",
        "n BETWEEN :1",
        "n IN ()",
        "attribute_exists(:5)",  # a function of a path, not a value
        "attribute_exists(n, s)",
        "begins_with(s)",
        "n = :5 n = :5",
        "AND = :5",
        "n ! :5",
        "l[x] = :1",
    ],
)
def test_expressions_dynamodb_refuses(text: str) -> None:
    with pytest.raises(ExpressionError):
        holds(text)


def test_undefined_placeholders_and_evaluation_errors() -> None:
    with pytest.raises(ExpressionError, match="attribute name: #nope"):
        holds("#nope = :1")
    with pytest.raises(ExpressionError, match="attribute value: :nope"):
        holds("n = :nope")
    with pytest.raises(EvaluationError, match="BETWEEN"):
        holds("n BETWEEN :6 AND :1")
    with pytest.raises(EvaluationError, match="type"):
        holds("attribute_type(n, :abc)")
    with pytest.raises(ExpressionError):
        holds("n IN (" + ", ".join([":1"] * 101) + ")")


def test_placeholders_used_are_reported() -> None:
    parsed = parse_condition("#a = :x AND (attribute_exists(#b.c) OR size(d) > :y)")
    assert parsed.names == {"#a", "#b"} and parsed.values == {":x", ":y"}


scalars = st.one_of(st.integers(-100, 100), st.text(max_size=4), st.booleans())


@given(left=scalars, right=scalars)
def test_boto3_built_conditions_agree_with_python(left: Any, right: Any) -> None:
    """Every comparison boto3 can build, evaluated on an item, answers what the guide defines (equality across
    types is false; order only between two numbers or two strings)."""
    item = {"a": canonical(left)}
    same_kind = type(left) is type(right) and not isinstance(left, bool)
    for condition, expected in [
        (Attr("a").eq(right), type(left) is type(right) and left == right),
        (Attr("a").ne(right), not (type(left) is type(right) and left == right)),
        (Attr("a").lt(right), same_kind and left < right),
        (Attr("a").gte(right), same_kind and left >= right),
        (Attr("a").between(right, right), same_kind and left == right),
    ]:
        built = ConditionExpressionBuilder().build_expression(condition)
        values = {k: canonical(v) for k, v in built.attribute_value_placeholders.items()}
        assert evaluate(built.condition_expression, item, built.attribute_name_placeholders, values) is expected


def test_canonical_values_are_what_boto3_returns() -> None:
    assert canonical({"n": 1, "l": (1, 2), "s": {1}}) == {"n": Decimal(1), "l": [Decimal(1), Decimal(2)], "s": {1}}
    with pytest.raises(TypeError):
        canonical(1.5)


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"ReturnValues": "NONE"},
        {"ConditionExpression": None},
        {"ExpressionAttributeNames": {"#a": "a"}},
        {"ExpressionAttributeNames": {}},
        {"ExpressionAttributeValues": {}},
        {"ExpressionAttributeValues": {":v": 1}},
        {"ConditionExpression": "attribute_exists(#a)", "ExpressionAttributeNames": {"#a": "a"}},
        {"FilterExpression": "#a = :v", "ExpressionAttributeNames": {"#a": "a"}},
    ],
)
def test_a_request_without_expressions_is_resolved_as_one_with_them(
    params: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``expressions`` answers a request with no expression parameter at once (a plain PutItem): the same answer,
    or the same refusal, as resolving and checking it all."""

    def outcome(request: dict[str, Any]) -> object:
        try:
            return dynamo_calls.expressions(request)
        except dynamo_calls.RequestError as err:
            return (err.code, err.message)

    fast = outcome({"Item": {"pk": "p"}, **params})
    monkeypatch.setattr(dynamo_calls, "_EXPRESSION_PARAMS", ("Item",))  # every request resolved in full
    assert fast == outcome({"Item": {"pk": "p"}, **params})
