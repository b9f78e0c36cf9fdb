"""The update expression evaluator (``sim.updates``) against the DynamoDB Developer Guide's "Update expressions"."""

from decimal import Decimal
from typing import Any

import pytest

from sim.expression_syntax import EvaluationError, ExpressionError
from sim.updates import parse_update
from sim.values import canonical

KEYS = ("pk", "sk")
ITEM: dict[str, Any] = canonical({"pk": "p", "sk": "s", "n": 5, "l": [1, 2, 3], "m": {"a": 1}, "ss": {"x", "y"}})
VALUES: dict[str, Any] = canonical({":1": 1, ":v": "v", ":l": [9], ":s": {"y", "z"}, ":m": {"b": 2}})


def apply(text: str, item: dict[str, Any] | None = None, names: dict[str, str] | None = None) -> dict[str, Any]:
    return parse_update(text).apply(ITEM if item is None else item, names or {}, VALUES, KEYS)


def test_set_reads_the_item_as_it_was() -> None:
    out = apply("SET n = n + :1, o = n, l = list_append(l, :l), m.b = :v, c = if_not_exists(c, n)")
    assert out["n"] == 6 and out["o"] == 5 and out["l"] == [1, 2, 3, 9] and out["m"] == {"a": 1, "b": "v"}
    assert out["c"] == 5 and ITEM["n"] == 5 and ITEM["m"] == {"a": 1}  # the input is left as it was


def test_remove_add_delete_and_clauses_in_any_order() -> None:
    out = apply("REMOVE l[0], l[2], m.a ADD n :1, newset :s DELETE ss :s SET x = :v")
    assert out["l"] == [2] and out["m"] == {} and out["n"] == 6 and out["newset"] == {"y", "z"}
    assert out["ss"] == {"x"} and out["x"] == "v"
    assert "ss" not in apply("DELETE ss :s", {**ITEM, "ss": {"y"}})  # an emptied set is removed
    assert apply("REMOVE absent, m.absent") == ITEM


def test_a_missing_item_starts_from_nothing() -> None:
    assert apply("SET a = :v ADD n :1", {}) == {"a": "v", "n": Decimal(1)}


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("SET sk = :v", ExpressionError),  # a key attribute
        ("SET a = :v, a = :v", ExpressionError),  # overlapping paths
        ("SET m = :m REMOVE m.a", ExpressionError),
        ("SET a = absent", EvaluationError),
        ("SET a = n + :v", EvaluationError),
        ("SET a = absent + :1", EvaluationError),
        ("SET nope.deeper = :v", EvaluationError),  # the parent must exist
        ("SET a = list_append(n, :l)", EvaluationError),
        ("ADD l :1", EvaluationError),
        ("ADD n :v", EvaluationError),
        ("DELETE n :s", EvaluationError),
    ],
)
def test_updates_dynamodb_refuses(text: str, error: type[Exception]) -> None:
    with pytest.raises(error):
        apply(text)


@pytest.mark.parametrize(
    "text", ["", "SET", "SET a", "SET a = :v SET b = :v", "PUT a = :v", "REMOVE :v", "ADD a", "SET a = :v,"]
)
def test_syntax_dynamodb_refuses(text: str) -> None:
    with pytest.raises(ExpressionError):
        parse_update(text)


def test_placeholders_and_touched_attributes() -> None:
    update = parse_update("SET #a = :x, #b.c = if_not_exists(#b.c, :y) REMOVE #d")
    assert update.names == {"#a", "#b", "#d"} and update.values == {":x", ":y"}
    assert update.updated({"#a": "a", "#b": "b", "#d": "d"}) == {"a", "b", "d"}
