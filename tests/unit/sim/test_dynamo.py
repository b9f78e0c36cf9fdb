"""The in-memory DynamoDB's raw answers side by side with moto's: the same call on both, the same answer (values,
ReturnValues, pages) or the same error (class, code, HTTP status, Item, CancellationReasons). What moto cannot show
(injected faults, the invariant checker's accessors, ...) is in ``test_dynamo_memory.py``.
"""

from collections.abc import Callable, Iterator
from decimal import Decimal
from itertools import count
from typing import Any

import boto3
import pytest
from boto3.dynamodb.conditions import Attr, Key
from boto3.dynamodb.types import Binary
from botocore.exceptions import ClientError
from moto import mock_aws

from core.schema import state_table
from sim.dynamo import MemoryDynamo, MemoryTable
from sim.faults import Faults
from sim.kernel import Kernel

Call = Callable[[Any], Any]


def memory() -> MemoryTable:
    kernel = Kernel(seed=3)
    return MemoryDynamo(kernel, Faults(kernel)).table("state")


@pytest.fixture(scope="module")
def moto_tables() -> Iterator[Any]:
    with mock_aws():
        yield boto3.resource("dynamodb", region_name="us-east-1")


def answer(table: Any, calls: list[Call]) -> list[Any]:
    """What each call answered (metadata left out) or raised (its class, code, status and carried items)."""
    out: list[Any] = []
    for call in calls:
        try:
            got = call(table)
        except ClientError as err:
            r = err.response
            status = r["ResponseMetadata"]["HTTPStatusCode"]
            out.append((type(err).__name__, r["Error"]["Code"], status, r.get("Item"), r.get("CancellationReasons")))
            continue
        if isinstance(got, dict):
            # moto adds ConsumedCapacity and (to TransactWriteItems) an empty ItemCollectionMetrics that DynamoDB
            # returns only when asked for (ReturnConsumedCapacity, ReturnItemCollectionMetrics): left out
            got = {
                k: v
                for k, v in got.items()
                if k not in ("ResponseMetadata", "ConsumedCapacity", "ItemCollectionMetrics")
            }
        out.append(got)
    return out


_TABLE_NUMBERS = count()  # a new moto table a comparison, in the module's one mock


def same(moto_tables: Any, calls: list[Call]) -> list[Any]:
    """Run ``calls`` on a fresh moto table and a fresh memory table; assert the answers are equal; return them."""
    name = f"t{next(_TABLE_NUMBERS)}"  # not ``id(calls)``: a freed list's id comes again, and its table exists
    moto_tables.create_table(**state_table(name))
    on_moto = answer(moto_tables.Table(name), calls)
    on_memory = answer(memory(), calls)
    assert on_memory == on_moto
    return on_memory


K = {"pk": "p", "sk": "a"}
ITEM = {
    **K,
    "n": 5,
    "d": Decimal("2.5"),
    "s": "x",
    "b": True,
    "z": None,
    "l": [1, "two", {"three": 3}],
    "m": {"k": "v", "inner": {"x": 1}},
    "ss": {"a", "b"},
    "ns": {1, 2},
    "bin": Binary(b"\x00\x01"),
}


def test_values_come_back_as_boto3_gives_them(moto_tables: Any) -> None:
    got = same(
        moto_tables,
        [
            lambda t: t.put_item(Item=ITEM),
            lambda t: t.get_item(Key=K),
            lambda t: t.get_item(Key={"pk": "p", "sk": "missing"}),
            lambda t: t.put_item(Item={**K, "s": "y"}, ReturnValues="ALL_OLD"),
            lambda t: t.delete_item(Key=K, ReturnValues="ALL_OLD"),
            lambda t: t.delete_item(Key=K),
        ],
    )
    assert got[1]["Item"]["n"] == Decimal(5) and isinstance(got[1]["Item"]["n"], Decimal)
    assert got[2] == {} and got[3]["Attributes"]["s"] == "x" and got[4]["Attributes"] == {**K, "s": "y"}


def test_update_expressions(moto_tables: Any) -> None:
    def update(expr: str, names: dict[str, str], values: dict[str, Any] | None = None, rv: str = "ALL_NEW") -> Call:
        kwargs: dict[str, Any] = {"Key": K, "UpdateExpression": expr, "ExpressionAttributeNames": names}
        if values:
            kwargs["ExpressionAttributeValues"] = values
        return lambda t: t.update_item(**kwargs, ReturnValues=rv)

    got = same(
        moto_tables,
        [
            update("SET #a = :a", {"#a": "a"}, {":a": 1}),  # no item: UpdateItem creates it
            update(
                "SET #a = #a + :one, #c = if_not_exists(#c, :zero)", {"#a": "a", "#c": "c"}, {":one": 1, ":zero": 0}
            ),
            update("SET #l = list_append(if_not_exists(#l, :e), :x)", {"#l": "l"}, {":e": [], ":x": ["y"]}),
            update("SET #m = :m", {"#m": "m"}, {":m": {"k": "v"}}, rv="UPDATED_NEW"),
            update("SET #m.#k2 = :v", {"#m": "m", "#k2": "k2"}, {":v": "w"}, rv="UPDATED_OLD"),
            update(
                "ADD #a :five, #ss :s DELETE #ss2 :s",
                {"#a": "a", "#ss": "ss", "#ss2": "ss2"},
                {":five": 5, ":s": {"q"}},
            ),
            update("REMOVE #c, #l[0]", {"#c": "c", "#l": "l"}, rv="ALL_OLD"),
            update("set #x = :x remove #a", {"#x": "x", "#a": "a"}, {":x": "lower-case keywords"}, rv="NONE"),
            lambda t: t.get_item(Key=K),
        ],
    )
    assert got[-1]["Item"] == {**K, "l": [], "m": {"k": "v", "k2": "w"}, "ss": {"q"}, "x": "lower-case keywords"}


STORED = {**K, "v": 1, "s": "abc", "l": [1, 2], "ss": {"x"}}  # the conditional puts write the item again


def test_conditions_and_their_failures(moto_tables: Any) -> None:
    def put(condition: Any, all_old: bool = True, item: dict[str, Any] | None = None) -> Call:
        extra = {"ReturnValuesOnConditionCheckFailure": "ALL_OLD"} if all_old else {}
        return lambda t: t.put_item(Item=item or STORED, ConditionExpression=condition, **extra)

    got = same(
        moto_tables,
        [
            put(Attr("pk").exists()),  # no item: fails, and ALL_OLD carries nothing
            put(Attr("pk").not_exists()),
            put(Attr("pk").not_exists()),  # fails with the item in DynamoDB JSON
            put(Attr("pk").not_exists(), all_old=False),  # fails without it
            put(Attr("missing").ne(1)),  # <> holds for a missing attribute
            put(Attr("v").lt(2) | Attr("v").gt(5)),
            put(Attr("v").between(1, 3) & ~Attr("v").is_in([7, 8])),
            put(Attr("s").begins_with("ab") & Attr("s").contains("bc") & Attr("l").contains(2)),
            put(Attr("ss").contains("x") & Attr("s").size().eq(3) & Attr("v").attribute_type("N")),
            put(Attr("missing").lt(1) | Attr("missing").eq(1)),
        ],
    )
    ccf = ("ConditionalCheckFailedException", "ConditionalCheckFailedException", 400)
    assert got[0] == (*ccf, None, None) and got[3] == (*ccf, None, None)
    assert got[2][:3] == ccf and got[2][3]["v"] == {"N": "1"}
    assert got[4:9] == [{}] * 5 and got[9][:3] == ccf


def test_requests_dynamodb_refuses(moto_tables: Any) -> None:
    got = same(
        moto_tables,
        [
            lambda t: t.update_item(
                Key=K,
                UpdateExpression="SET #a = :a",
                ExpressionAttributeNames={"#a": "a", "#b": "b"},
                ExpressionAttributeValues={":a": 1},
            ),
            lambda t: t.update_item(Key=K, UpdateExpression="SET #a = :a", ExpressionAttributeNames={"#a": "a"}),
            lambda t: t.update_item(
                Key=K,
                UpdateExpression="SET #k = :a",
                ExpressionAttributeNames={"#k": "sk"},
                ExpressionAttributeValues={":a": "b"},
            ),
            lambda t: t.get_item(Key={**K, "x": "y"}),
            lambda t: t.put_item(Item={"pk": "p"}),
            lambda t: t.put_item(Item={"pk": "p", "sk": 1}),
        ],
    )
    assert all(g[:3] == ("ClientError", "ValidationException", 400) for g in got)


def test_queries_in_sort_key_order_with_pages(moto_tables: Any) -> None:
    sks = ["b#2", "a", "b#10", "b#1", "c", "é", "B"]
    calls: list[Call] = [lambda t, sk=sk: t.put_item(Item={"pk": "p", "sk": sk, "v": len(sk)}) for sk in sks]
    calls += [lambda t: t.put_item(Item={"pk": "q", "sk": "b#3"})]
    keys = lambda out: [i["sk"] for i in out["Items"]]  # noqa: E731  # a one-line reader
    got = same(
        moto_tables,
        [
            *calls,
            lambda t: keys(t.query(KeyConditionExpression=Key("pk").eq("p"))),
            lambda t: keys(t.query(KeyConditionExpression=Key("pk").eq("p") & Key("sk").begins_with("b#"))),
            lambda t: keys(t.query(KeyConditionExpression=Key("pk").eq("p") & Key("sk").between("a", "b#2"))),
            lambda t: keys(
                t.query(KeyConditionExpression=Key("pk").eq("p") & Key("sk").lt("b"), ScanIndexForward=False)
            ),
            lambda t: t.query(KeyConditionExpression=Key("pk").eq("p") & Key("sk").gte("c"), Limit=1),
            lambda t: t.query(
                KeyConditionExpression=Key("pk").eq("p"), ExclusiveStartKey={"pk": "p", "sk": "b#2"}, Limit=3
            ),
            lambda t: t.query(KeyConditionExpression=Key("pk").eq("p"), FilterExpression=Attr("v").eq(3)),
            lambda t: t.query(KeyConditionExpression=Key("pk").eq("nobody")),
            lambda t: t.query(KeyConditionExpression=Key("sk").eq("a")),
        ],
    )
    results = got[len(calls) :]
    assert results[0] == ["B", "a", "b#1", "b#10", "b#2", "c", "é"]  # UTF-8 byte order
    assert results[1] == ["b#1", "b#10", "b#2"] and results[2] == ["a", "b#1", "b#10", "b#2"]
    assert results[3] == ["a", "B"]
    assert results[4]["Items"] == [{"pk": "p", "sk": "c", "v": 1}] and results[4]["LastEvaluatedKey"] == {
        "pk": "p",
        "sk": "c",
    }
    assert [i["sk"] for i in results[5]["Items"]] == ["c", "é"] and "LastEvaluatedKey" not in results[5]
    assert results[6]["Count"] == 2 and results[6]["ScannedCount"] == 7
    assert results[7] == {"Items": [], "Count": 0, "ScannedCount": 0}
    assert results[8][:3] == ("ClientError", "ValidationException", 400)


def transact(*items: dict[str, Any]) -> Call:
    def call(t: Any) -> Any:
        return t.meta.client.transact_write_items(
            TransactItems=[{k: {"TableName": t.name, **v} for k, v in item.items()} for item in items]
        )

    return call


def test_transactions_apply_all_or_nothing(moto_tables: Any) -> None:
    check = {"Key": K, "ConditionExpression": "#v = :v", "ExpressionAttributeNames": {"#v": "v"}}
    got = same(
        moto_tables,
        [
            lambda t: t.put_item(Item={**K, "v": 1}),
            transact(
                {"ConditionCheck": {**check, "ExpressionAttributeValues": {":v": 1}}},
                {"Put": {"Item": {"pk": "p", "sk": "b", "n": Decimal("1.5")}}},
                {
                    "Update": {
                        "Key": {"pk": "p", "sk": "c"},
                        "UpdateExpression": "SET #n = :n",
                        "ExpressionAttributeNames": {"#n": "n"},
                        "ExpressionAttributeValues": {":n": 2},
                    }
                },
            ),
            transact(
                {
                    "ConditionCheck": {
                        **check,
                        "ExpressionAttributeValues": {":v": 9},
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                },
                {"Delete": {"Key": {"pk": "p", "sk": "b"}}},
            ),
            transact(
                {"ConditionCheck": {**check, "ExpressionAttributeValues": {":v": 1}}},
                {
                    "Put": {
                        "Item": {"pk": "p", "sk": "b"},
                        "ConditionExpression": "attribute_not_exists(pk)",
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                },
            ),
            transact({"Delete": {"Key": {"pk": "p", "sk": "b"}}}, {"Delete": {"Key": {"pk": "p", "sk": "b"}}}),
            lambda t: [i["sk"] for i in t.query(KeyConditionExpression=Key("pk").eq("p"))["Items"]],
        ],
    )
    cancelled = ("TransactionCanceledException", "TransactionCanceledException", 400)
    assert got[1] == {}
    lock_item = {"pk": {"S": "p"}, "sk": {"S": "a"}, "v": {"N": "1"}}
    failed = {"Code": "ConditionalCheckFailed", "Message": "The conditional request failed", "Item": lock_item}
    assert got[2] == (*cancelled, None, [failed, {"Code": "None"}])  # fmt: skip
    assert got[3][:3] == cancelled and [r["Code"] for r in got[3][4]] == ["None", "ConditionalCheckFailed"]
    assert got[4][:3] == ("ClientError", "ValidationException", 400)
    assert got[5] == ["a", "b", "c"]


def test_a_filter_asked_again_answers_what_changed_since(moto_tables: Any) -> None:
    # the memory table keeps a filter's verdict on each stored item (``sim.dynamo_filters``), and on a whole page:
    # a rewritten item is judged again, a deleted one gone, the same text with other values its own verdicts, as moto
    def put(sk: str, **fields: Any) -> Call:
        return lambda t: t.put_item(Item={"pk": "p", "sk": sk, **fields})

    def keys(keep: Any, limit: int = 0) -> Call:
        extra = {"Limit": limit} if limit else {}
        return lambda t: [
            i["sk"] for i in t.query(KeyConditionExpression=Key("pk").eq("p"), FilterExpression=keep, **extra)["Items"]
        ]

    unindexed, queued, running = Attr("indexed").not_exists(), Attr("s").eq("queued"), Attr("s").eq("running")
    got = same(
        moto_tables,
        [
            put("a", indexed=True, s="queued"),
            put("b", s="running"),
            put("c", s="queued"),
            keys(unindexed),
            keys(queued),
            keys(running),
            put("c", s="running"),  # the same items but one: the others' verdicts kept
            keys(queued),
            keys(running),
            put("a", s="running"),  # loses ``indexed``, changes status
            lambda t: t.delete_item(Key={"pk": "p", "sk": "c"}),
            lambda t: t.update_item(Key={"pk": "p", "sk": "b"}, UpdateExpression="SET #i = :t", **INDEXED),
            keys(unindexed),
            keys(queued),
            keys(running),
            keys(running, limit=1),
        ],
    )
    assert got[3:6] == [["b", "c"], ["a", "c"], ["b"]] and got[7:9] == [["a"], ["b", "c"]]
    assert got[12:] == [["a"], [], ["a", "b"], ["a"]]


INDEXED = {"ExpressionAttributeNames": {"#i": "indexed"}, "ExpressionAttributeValues": {":t": True}}
