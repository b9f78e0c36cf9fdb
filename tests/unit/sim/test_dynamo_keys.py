"""The memoized split of a Query's key condition (``sim.dynamo_keys._split_of``: its shape kept by text, key names and
``#name`` placeholders) answers and raises exactly what the general ``_split`` does, for random key conditions, names
and values (valid ones, and ones DynamoDB refuses by their form, an undefined name or a value of the wrong type),
each asked twice with different values: once to fill the memo, once from it."""

from __future__ import annotations

import random
from typing import Any

import pytest

from sim import dynamo_keys
from sim.dynamo_calls import RequestError
from sim.expression_syntax import Context, ExpressionError
from sim.expressions import parse_condition

KEYS = ("pk", "sk")
PARTS = (
    "#p = :v",
    "pk = :v",
    "#p = :a",
    "#p < :v",
    "begins_with(#p, :v)",
    "#s = :a",
    "sk = :a",
    "#s < :a",
    "#s <= :a",
    "#s > :a",
    "#s >= :a",
    "#s <> :a",
    "#s = #p",
    "#s BETWEEN :a AND :b",
    "sk BETWEEN :b AND :a",
    "begins_with(#s, :a)",
    "begins_with(sk, :v)",
    "contains(#s, :a)",
    "#x = :a",
    "#s = :a OR #p = :v",
)
NAMES = (
    {"#p": "pk", "#s": "sk"},
    {"#s": "sk", "#p": "pk"},
    {"#p": "pk"},
    {"#p": "sk", "#s": "pk"},
    {"#p": "pk", "#s": "sk", "#x": "other"},
)


def _values(rng: random.Random) -> dict[str, Any]:
    pick = ["CLUSTER", "NODE#a", "NODE#b", "", 7]
    return {":v": rng.choice(pick), ":a": rng.choice(pick), ":b": rng.choice(pick)}


def _outcome(call: Any) -> Any:
    try:
        pk, sk = call()
    except (RequestError, ExpressionError) as err:
        return type(err), getattr(err, "code", None), str(err)
    return pk, sk


@pytest.mark.parametrize("seed", range(20))
def test_the_memoized_split_answers_and_raises_as_the_general_one(seed: int) -> None:
    rng = random.Random(seed)
    dynamo_keys._SHAPES.clear()
    for _ in range(150):
        text = " AND ".join(rng.sample(PARTS, rng.choice([1, 2, 2, 2, 3])))
        names = rng.choice(NAMES)
        for _ask in range(2):  # the first fills the memo, the second answers from it (other values)
            ctx = Context({}, names, _values(rng))
            fast = _outcome(lambda t=text, c=ctx: dynamo_keys._split_of(t, c, KEYS))
            slow = _outcome(
                lambda t=text, c=ctx: dynamo_keys._split(parse_condition(t, dynamo_keys.WHAT).condition, c, KEYS)
            )
            assert fast == slow, (text, names, ctx.values)
    assert dynamo_keys._SHAPES  # some shapes were valid and kept
