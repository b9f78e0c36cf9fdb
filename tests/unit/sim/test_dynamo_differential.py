"""Differential test: random sequences of conditional writes, transactions and queries give the same answers and
the same errors on the in-memory DynamoDB as on moto's (hypothesis draws the sequences; a difference is shrunk to
the shortest sequence that shows it).

Values are numbers only, so no condition compares values of two types (moto raises on that, ``test_dynamo.py``).
"""

import itertools
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from boto3.dynamodb.conditions import Attr, ConditionBase, ConditionExpressionBuilder, Key
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws

from core.schema import state_table
from sim.dynamo import MemoryDynamo
from sim.faults import Faults
from sim.kernel import Kernel

SKS = ["a", "b", "c"]
_names = itertools.count()


@pytest.fixture(scope="module")
def moto_resource() -> Iterator[Any]:
    with mock_aws():
        yield boto3.resource("dynamodb", region_name="us-east-1")


numbers = st.integers(0, 3)
leaf = st.one_of(
    st.just(Attr("pk").exists()),
    st.just(Attr("pk").not_exists()),
    st.just(Attr("v").exists()),
    numbers.map(lambda n: Attr("v").eq(n)),
    numbers.map(lambda n: Attr("v").ne(n)),
    numbers.map(lambda n: Attr("v").lt(n)),
    numbers.map(lambda n: Attr("v").gte(n)),
    numbers.map(lambda n: Attr("w").lte(n)),
    st.tuples(numbers, numbers).map(lambda p: Attr("v").between(min(p), max(p))),
    st.lists(numbers, min_size=1, max_size=3).map(lambda ns: Attr("v").is_in(ns)),
)
conditions: st.SearchStrategy[ConditionBase] = st.recursive(
    leaf,
    lambda inner: st.one_of(
        st.tuples(inner, inner).map(lambda p: p[0] & p[1]),
        st.tuples(inner, inner).map(lambda p: p[0] | p[1]),
        inner.map(lambda c: ~c),
    ),
    max_leaves=4,
)
maybe_condition = st.one_of(st.none(), conditions)
sks = st.sampled_from(SKS)
updates = st.sampled_from(
    [
        ("SET #v = :x", True),
        ("SET #v = #v + :x", True),
        ("SET #w = if_not_exists(#v, :x)", True),
        ("REMOVE #v", False),
        ("ADD #v :x", True),
    ]
)

put = st.tuples(st.just("put"), sks, numbers, maybe_condition, st.booleans())
update = st.tuples(st.just("update"), sks, updates, numbers, maybe_condition, st.booleans())
delete = st.tuples(st.just("delete"), sks, maybe_condition, st.booleans())
query = st.tuples(st.just("query"), st.sampled_from([None, "a", "b"]), st.booleans())
transact = st.tuples(st.just("transact"), st.lists(st.tuples(sks, numbers, conditions), min_size=1, max_size=3))
operations = st.lists(st.one_of(put, update, delete, query, transact), min_size=1, max_size=8)


def built(condition: ConditionBase) -> dict[str, Any]:
    expr = ConditionExpressionBuilder().build_expression(condition)
    out: dict[str, Any] = {"ConditionExpression": expr.condition_expression}
    if expr.attribute_name_placeholders:
        out["ExpressionAttributeNames"] = expr.attribute_name_placeholders
    if expr.attribute_value_placeholders:
        out["ExpressionAttributeValues"] = expr.attribute_value_placeholders
    return out


def call(table: Any, op: tuple[Any, ...]) -> Any:
    kind = op[0]
    if kind == "put":
        _, sk, v, condition, all_old = op
        kwargs: dict[str, Any] = {"Item": {"pk": "p", "sk": sk, "v": v}, "ReturnValues": "ALL_OLD"}
    elif kind == "update":
        _, sk, (expression, uses_value), v, condition, all_old = op
        names = {"#v": "v", "#w": "w"} if "#w" in expression else {"#v": "v"}
        kwargs = {"Key": {"pk": "p", "sk": sk}, "UpdateExpression": expression, "ExpressionAttributeNames": names}
        kwargs["ReturnValues"] = "ALL_NEW"
        if uses_value:
            kwargs["ExpressionAttributeValues"] = {":x": v}
    elif kind == "delete":
        _, sk, condition, all_old = op
        kwargs = {"Key": {"pk": "p", "sk": sk}, "ReturnValues": "ALL_OLD"}
    elif kind == "query":
        _, prefix, forward = op
        key = Key("pk").eq("p") if prefix is None else Key("pk").eq("p") & Key("sk").begins_with(prefix)
        return table.query(KeyConditionExpression=key, ScanIndexForward=forward)["Items"]
    else:
        items = []
        for sk, v, condition in {sk: (sk, v, c) for sk, v, c in op[1]}.values():  # one action per item
            put_item = {"TableName": table.name, "Item": {"pk": "p", "sk": sk, "v": v}, **built(condition)}
            items.append({"Put": {**put_item, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}})
        return table.meta.client.transact_write_items(TransactItems=items).get("ItemCollectionMetrics", {})
    if condition is not None:
        kwargs["ConditionExpression"] = condition
        if all_old:
            kwargs["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    method = {"put": table.put_item, "update": table.update_item, "delete": table.delete_item}[kind]
    return method(**kwargs).get("Attributes")


def answers(table: Any, ops: list[tuple[Any, ...]]) -> list[Any]:
    out = []
    for op in ops:
        try:
            out.append(call(table, op))
        except ClientError as err:
            r = err.response
            out.append((r["Error"]["Code"], r.get("Item"), r.get("CancellationReasons")))
    out.append(table.query(KeyConditionExpression=Key("pk").eq("p"))["Items"])
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations)
def test_random_sequences_answer_alike(moto_resource: Any, ops: list[tuple[Any, ...]]) -> None:
    name = f"diff-{next(_names)}"
    moto_resource.create_table(**state_table(name))
    kernel = Kernel(seed=0)
    on_memory = answers(MemoryDynamo(kernel, Faults(kernel)).table(name), ops)
    on_moto = answers(moto_resource.Table(name), ops)
    assert on_memory == on_moto
