"""``localworld.dynamo_costs``: moto's DynamoDB answers exactly as before, at the cost of the items a request names.

Every answer is compared with moto's own (the patches taken away for the second run of the same requests), and the
costs are shown by what moto does, never by timing: the tables a transaction copies, the items a Query compares.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.dynamodb.models.table import Table

from core.schema import state_table
from localworld import dynamo_costs
from localworld.aws import serialise_dynamodb, serialised
from localworld.lockrace import unserialised_dynamodb

NAME = "state"
VALUES: dict[str, Any] = {
    "text": "a",
    "number": Decimal("12.5"),
    "flag": True,
    "nothing": None,
    "row": ["x", Decimal(3), False, None, ["nested"], {"k": "v"}],
    "map": {"a": {"b": [Decimal("-0.25"), "c"]}, "empty": {}},
    "strings": {"p", "q"},
    "numbers": {Decimal(1), Decimal(2)},
    "blob": b"\x00\xffbinary",
    "blobs": {b"a", b"b"},
    "listed_blob": [b"in a list"],
}


@pytest.fixture(autouse=True)
def _installed() -> Iterator[None]:
    serialise_dynamodb()  # as every test's moto has it (tests/conftest.py)
    yield
    dynamo_costs.install(serialised)


@contextmanager
def _moto_alone() -> Iterator[None]:
    dynamo_costs.uninstall()
    try:
        yield
    finally:
        dynamo_costs.install(serialised)


def _filled() -> Any:
    client = boto3.client("dynamodb", region_name="us-east-1")
    client.create_table(**state_table(NAME))
    table = boto3.resource("dynamodb", region_name="us-east-1").Table(NAME)
    with table.batch_writer() as batch:
        for pk in ("CLUSTER#c", "CLUSTER#c#AGENT", "CLUSTER#d"):
            for n in range(40):
                for kind in ("CMD#", "NODE#", "RUN#"):
                    batch.put_item(Item={"pk": pk, "sk": f"{kind}{n:03d}", "n": n, **VALUES})
        batch.put_item(Item={"pk": "CLUSTER#c", "sk": "MEMBERSHIP", **VALUES})
        batch.put_item(Item={"pk": "CLUSTER#c", "sk": "NODE", **VALUES})
    return client


QUERIES: list[dict[str, Any]] = [
    {"KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": {"S": "CLUSTER#c"}}},
    {
        "KeyConditionExpression": "pk = :p AND sk BETWEEN :a AND :b",
        "ExpressionAttributeValues": {":p": {"S": "CLUSTER#c"}, ":a": {"S": "MEMBERSHIP"}, ":b": {"S": "NODE$"}},
    },
    {
        "KeyConditionExpression": "#p = :p and begins_with(#s, :k)",
        "ExpressionAttributeNames": {"#p": "pk", "#s": "sk"},
        "ExpressionAttributeValues": {":p": {"S": "CLUSTER#c#AGENT"}, ":k": {"S": "NODE#01"}},
    },
    {
        "KeyConditionExpression": "pk = :p AND sk = :k",
        "ExpressionAttributeValues": {":p": {"S": "CLUSTER#d"}, ":k": {"S": "RUN#007"}},
    },
    {
        "KeyConditionExpression": "pk = :p AND sk < :k",
        "ExpressionAttributeValues": {":p": {"S": "CLUSTER#d"}, ":k": {"S": "NODE#002"}},
    },
    {
        "KeyConditionExpression": "pk = :p AND sk >= :k",
        "ExpressionAttributeValues": {":p": {"S": "CLUSTER#c"}, ":k": {"S": "RUN#038"}},
        "ScanIndexForward": False,
    },
    {
        "KeyConditionExpression": "pk = :p AND begins_with(sk, :k)",
        "FilterExpression": "n < :n",
        "ExpressionAttributeValues": {":p": {"S": "CLUSTER#c"}, ":k": {"S": "CMD#"}, ":n": {"N": "5"}},
        "Limit": 7,
    },
    {
        "KeyConditionExpression": "pk = :p AND begins_with(sk, :k)",
        "ExpressionAttributeValues": {":p": {"S": "CLUSTER#x"}, ":k": {"S": "CMD#"}},
    },
]


def _answers(client: Any) -> list[Any]:
    out: list[Any] = []
    for query in QUERIES:
        pages, start = [], None
        while True:
            page = client.query(TableName=NAME, ConsistentRead=True, **query, **(start or {}))
            page.pop("ResponseMetadata")
            pages.append(page)
            if "LastEvaluatedKey" not in page:
                break
            start = {"ExclusiveStartKey": page["LastEvaluatedKey"]}
        out.append(pages)
    key = {"pk": {"S": "CLUSTER#c"}, "sk": {"S": "NODE#001"}}
    out.append(client.get_item(TableName=NAME, Key=key)["Item"])
    return out


def test_every_answer_is_moto_s_own_binary_nested_and_paginated_alike() -> None:
    with mock_aws():
        client = _filled()
        patched = _answers(client)
        with _moto_alone():
            assert _answers(client) == patched
    assert patched[1][0]["Count"] == 42  # MEMBERSHIP, NODE and the 40 NODE# items: the slice holds them all
    assert patched[0][0]["Items"][0]["blob"] == {"B": VALUES["blob"]}


def _compares(run: Callable[[], Any]) -> tuple[Any, int]:
    calls = [0]
    original = DynamoType.compare

    def counted(self: DynamoType, *args: Any) -> Any:
        calls[0] += 1
        return original(self, *args)

    setattr(DynamoType, "compare", counted)  # noqa: B010
    try:
        return run(), calls[0]
    finally:
        setattr(DynamoType, "compare", original)  # noqa: B010


def test_a_query_judges_only_the_slice_of_its_partition_its_key_condition_can_hold_for() -> None:
    with mock_aws():
        client = _filled()
        query = QUERIES[2]  # NODE#010..NODE#019 of one partition of 122 items, in a table of 362
        answer, judged = _compares(lambda: client.query(TableName=NAME, **query)["Items"])
        with _moto_alone():
            alone, judged_alone = _compares(lambda: client.query(TableName=NAME, **query)["Items"])
    assert answer == alone and len(answer) == 10
    assert judged == 10
    assert judged_alone == 120  # every item of the partition (moto's own)


def _tables_copied(run: Callable[[], Any]) -> int:
    copied = [0]
    original = copy.deepcopy

    def spy(value: Any, memo: Any = None) -> Any:
        copied[0] += isinstance(value, Table)
        return original(value, memo)

    setattr(copy, "deepcopy", spy)  # noqa: B010  # what moto's backend calls (its ``copy`` module), patched or not
    try:
        run()
    finally:
        setattr(copy, "deepcopy", original)  # noqa: B010
    return copied[0]


def _items(client: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = client.scan(TableName=NAME, ConsistentRead=True)["Items"]
    return items


def _key(sk: str) -> dict[str, Any]:
    return {"pk": {"S": "CLUSTER#c"}, "sk": {"S": sk}}


def _cancelled(client: Any, actions: list[dict[str, Any]]) -> str:
    with pytest.raises(ClientError) as caught:
        client.transact_write_items(TransactItems=actions)
    return str(caught.value.response["Error"]["Code"])


def _update(sk: str, expression: str, values: dict[str, Any]) -> dict[str, Any]:
    return {
        "Update": {
            "TableName": NAME,
            "Key": _key(sk),
            "UpdateExpression": expression,
            "ExpressionAttributeValues": values,
        }
    }


FAILING: list[list[dict[str, Any]]] = [
    [  # three writes applied, then a condition fails: all three undone
        {"Put": {"TableName": NAME, "Item": {**_key("NEW"), "v": {"S": "x"}}}},
        _update("RUN#001", "SET n = :n", {":n": {"N": "99"}}),
        {"Delete": {"TableName": NAME, "Key": _key("CMD#002")}},
        {"ConditionCheck": {"TableName": NAME, "Key": _key("LOCK"), "ConditionExpression": "attribute_exists(pk)"}},
    ],
    [  # a key named twice: refused after the first write
        {"Put": {"TableName": NAME, "Item": {**_key("NEW"), "v": {"S": "x"}}}},
        {"Delete": {"TableName": NAME, "Key": _key("NEW")}},
    ],
    [  # an update refused by its own expression after a put
        {"Put": {"TableName": NAME, "Item": {**_key("RUN#003"), "v": {"S": "replaced"}}}},
        _update("RUN#004", "SET n = n + :one", {":one": {"S": "not a number"}}),
    ],
]


@pytest.mark.parametrize("actions", FAILING, ids=["condition", "key-twice", "update-refused"])
def test_a_cancelled_transaction_leaves_the_table_as_moto_s_own_backup_does_and_copies_no_table(
    actions: list[dict[str, Any]],
) -> None:
    with mock_aws():
        client = _filled()
        before = _items(client)
        codes: list[str] = []
        assert _tables_copied(lambda: codes.append(_cancelled(client, actions))) == 0
        assert _items(client) == before
        with _moto_alone():
            assert _tables_copied(lambda: codes.append(_cancelled(client, actions))) == len(actions)  # one each
            assert _items(client) == before
    assert codes[0] == codes[1]


def test_an_applied_transaction_is_applied_and_unserialised_requests_keep_moto_s_own_backup() -> None:
    with mock_aws():
        client = _filled()
        put = [{"Put": {"TableName": NAME, "Item": {**_key("LOCK"), "v": {"S": "held"}}}}]
        assert _tables_copied(lambda: client.transact_write_items(TransactItems=put)) == 0
        got = client.get_item(TableName=NAME, Key=_key("LOCK"))["Item"]
        assert got["v"] == {"S": "held"}
        with unserialised_dynamodb():
            assert _tables_copied(lambda: client.transact_write_items(TransactItems=put)) == 1
