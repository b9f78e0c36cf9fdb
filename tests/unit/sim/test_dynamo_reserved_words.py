"""DynamoDB's reserved words side by side with moto: an expression that names an attribute by a reserved word without
an ``#name`` placeholder is refused with ValidationException "Invalid <expression>: Attribute name is a reserved
keyword; reserved keyword: <word>" (DynamoDB Developer Guide, "Reserved words in DynamoDB"), and through a
placeholder the same word is an attribute like any other."""

from collections.abc import Iterator
from itertools import count
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from core.schema import state_table
from sim.dynamo import MemoryDynamo
from sim.faults import Faults
from sim.kernel import Kernel
from sim.reserved_words import RESERVED_WORDS

K = {"pk": "p", "sk": "a"}


@pytest.fixture(scope="module")
def moto_tables() -> Iterator[Any]:
    with mock_aws():
        yield boto3.resource("dynamodb", region_name="us-east-1")


def _memory() -> Any:
    kernel = Kernel(seed=3)
    return MemoryDynamo(kernel, Faults(kernel)).table("state")


def _answer(table: Any, params: dict[str, Any], put: bool = False) -> Any:
    """The item after the call, or the error's class, code, HTTP status and message."""
    table.put_item(Item={**K, "indexed": False, "m": {"status": "x"}})
    try:
        if put:
            table.put_item(**params)
        else:
            table.update_item(Key=K, **params)
    except ClientError as err:
        r = err.response
        return type(err).__name__, r["Error"]["Code"], r["ResponseMetadata"]["HTTPStatusCode"], r["Error"]["Message"]
    return table.get_item(Key=K, ConsistentRead=True)["Item"]


CASES: list[tuple[dict[str, Any], bool]] = [
    ({"UpdateExpression": "SET indexed = :t", "ExpressionAttributeValues": {":t": True}}, False),
    ({"UpdateExpression": "set Indexed = :t", "ExpressionAttributeValues": {":t": True}}, False),  # any case
    (
        {
            "UpdateExpression": "SET #m.status = :s",
            "ExpressionAttributeNames": {"#m": "m"},
            "ExpressionAttributeValues": {":s": "y"},
        },
        False,
    ),  # a nested name too
    ({"UpdateExpression": "REMOVE size", "ConditionExpression": "attribute_exists(pk)"}, False),
    (
        {
            "UpdateExpression": "SET #i = :t",
            "ExpressionAttributeNames": {"#i": "indexed"},
            "ExpressionAttributeValues": {":t": True},
        },
        False,
    ),  # through a placeholder: applied
    ({"Item": {**K, "v": 1}, "ConditionExpression": "attribute_exists(status)"}, True),
    (
        {"Item": {**K, "v": 1}, "ConditionExpression": "attribute_exists(#s)", "ExpressionAttributeNames": {"#s": "m"}},
        True,
    ),
]


_TABLE_NUMBERS = count()


@pytest.mark.parametrize(("params", "put"), CASES)
def test_reserved_words_are_refused_unless_escaped_as_moto_refuses_them(
    moto_tables: Any, params: dict[str, Any], put: bool
) -> None:
    name = f"t{next(_TABLE_NUMBERS)}"  # a new moto table a case, in the module's one mock
    moto_tables.create_table(**state_table(name))
    on_moto = _answer(moto_tables.Table(name), params, put)
    assert _answer(_memory(), params, put) == on_moto
    escaped = "ExpressionAttributeNames" in params and "status" not in params.get("UpdateExpression", "")
    if not escaped:
        what = "ConditionExpression" if put else "UpdateExpression"
        assert on_moto[1:3] == ("ValidationException", 400)
        assert on_moto[3].startswith(f"Invalid {what}: Attribute name is a reserved keyword; reserved keyword: ")
    else:
        assert type(on_moto) is dict


def test_the_list_is_dynamodb_s() -> None:
    assert len(RESERVED_WORDS) == 573 and {"INDEXED", "STATUS", "SIZE", "TTL", "NAME"} <= RESERVED_WORDS
    assert not {"PK", "SK", "VERSION", "HOLDER", "FENCING"} & RESERVED_WORDS  # the product's own names, unescaped
