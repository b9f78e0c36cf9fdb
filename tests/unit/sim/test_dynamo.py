"""The in-memory DynamoDB's raw answers side by side with moto's: the same call on both, the same answer (values,
ReturnValues, pages) or the same error (class, code, HTTP status, Item, CancellationReasons); plus what moto cannot
show (injected faults, the invariant checker's accessors).
"""

from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import boto3
import pytest
from boto3.dynamodb.conditions import Attr, Key
from boto3.dynamodb.types import Binary
from botocore.exceptions import ClientError
from moto import mock_aws

from adapters.dynamo.lock import LeaseLock
from adapters.dynamo.store import Store
from core.exceptions import LockHeldError, StoreUnavailableError
from core.schema import state_table
from sim.dynamo import MemoryDynamo, MemoryTable
from sim.faults import Faults, FaultWindow
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


def same(moto_tables: Any, calls: list[Call]) -> list[Any]:
    """Run ``calls`` on a fresh moto table and a fresh memory table; assert the answers are equal; return them."""
    name = f"t{id(calls)}"
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


# -- what moto cannot show ----------------------------------------------------------------------------------------


def test_injected_faults_answer_as_dynamodb_does() -> None:
    kernel = Kernel(seed=1)
    faults = Faults(kernel)
    dynamo = MemoryDynamo(kernel, faults)
    table = dynamo.table("state")
    store = Store(table, "demo")
    lease = LeaseLock(store, clock=lambda: 1.0).acquire("a", "refresh", 60)
    faults.add(FaultWindow("dynamodb", "PutItem", 0, 10, "ProvisionedThroughputExceededException"))
    faults.add(FaultWindow("dynamodb", "Query", 0, 10, "InternalServerError"))
    faults.add(FaultWindow("dynamodb", "TransactWriteItems", 0, 10, "TransactionConflict"))
    with pytest.raises(ClientError) as throttled:
        table.put_item(Item=K)
    assert type(throttled.value).__name__ == "ProvisionedThroughputExceededException"
    assert throttled.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    with pytest.raises(ClientError) as internal:
        table.query(KeyConditionExpression=Key("pk").eq("p"))
    assert internal.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500
    with pytest.raises(ClientError) as conflict:
        transact({"Put": {"Item": K}}, {"Put": {"Item": {**K, "sk": "b"}}})(table)
    assert [r["Code"] for r in conflict.value.response["CancellationReasons"]].count("TransactionConflict") == 1
    with pytest.raises(StoreUnavailableError):
        store.put("X", {})
    with pytest.raises(StoreUnavailableError):
        list(store.query_partition())
    faults.add(FaultWindow("dynamodb", "GetItem", 0, 10, "ThrottlingException"))
    with pytest.raises(StoreUnavailableError):
        LeaseLock(store, clock=lambda: 2.0).acquire("a", "refresh", 60)
    with pytest.raises(StoreUnavailableError):  # a fenced write cancelled by a conflict: retryable, as AWS advises
        store.put("Y", {}, fence=lease)
    assert len(table) == 1 and dynamo.calls["PutItem"] == 3 and faults.injected["dynamodb:GetItem:ThrottlingException"]
    kernel.run(until=10)
    store.put("X", {"a": 1})
    assert table.items("CLUSTER#demo")[1:] == [{"pk": "CLUSTER#demo", "sk": "X", "a": Decimal(1)}]


def test_accessors_copy_and_listeners_see_every_write() -> None:
    kernel = Kernel(seed=1)
    dynamo = MemoryDynamo(kernel, Faults(kernel))
    seen: list[tuple[str, tuple[str, str], Any, Any]] = []
    dynamo.listeners.append(lambda *write: seen.append(write))
    table = dynamo.table("state")
    table.put_item(Item={**K, "l": [1]})
    table.items("p")[0]["l"].append(2)  # a copy: the stored item is untouched
    assert table.peek("p", "a") == {**K, "l": [Decimal(1)]}
    table.delete_item(Key=K)
    assert seen == [
        ("state", ("p", "a"), None, {**K, "l": [Decimal(1)]}),
        ("state", ("p", "a"), {**K, "l": [Decimal(1)]}, None),
    ]
    assert dynamo.snapshot() == {"state": {}} and table.items("p") == []
    for pk, sk in (("q", "b"), ("p", "z"), ("q", "a")):
        table.put_item(Item={"pk": pk, "sk": sk})
    assert [(i["pk"], i["sk"]) for i in table.items()] == [("p", "z"), ("q", "a"), ("q", "b")]
    assert list(table.snapshot()) == [("p", "z"), ("q", "a"), ("q", "b")] and len(table) == 3


def test_floats_are_refused_as_boto3_refuses_them() -> None:
    with pytest.raises(TypeError):
        memory().put_item(Item={**K, "f": 1.5})


def test_a_page_that_stops_at_its_limit_has_a_last_evaluated_key() -> None:
    """Moto differs: it leaves out LastEvaluatedKey when the Limit-th item is the partition's last. DynamoDB stops at
    the limit without looking further and returns the key ("Query", Limit: "it stops the operation and returns the
    matching values up to that point, and a key in LastEvaluatedKey to apply in a subsequent operation"); the next
    page is then empty. The memory table follows DynamoDB."""
    table = memory()
    for sk in ("a", "b"):
        table.put_item(Item={"pk": "p", "sk": sk})
    first = table.query(KeyConditionExpression=Key("pk").eq("p"), Limit=2)
    assert [i["sk"] for i in first["Items"]] == ["a", "b"] and first["LastEvaluatedKey"] == {"pk": "p", "sk": "b"}
    last = table.query(KeyConditionExpression=Key("pk").eq("p"), Limit=2, ExclusiveStartKey=first["LastEvaluatedKey"])
    assert last["Items"] == [] and "LastEvaluatedKey" not in last
    assert [i["sk"] for i in Store(table, "x").query_prefix("")] == []  # the adapter follows pages to the end


def test_a_query_reads_at_most_a_megabyte_a_page() -> None:
    """DynamoDB "Query": "A single Query operation will read up to the maximum number of items set (if using the Limit
    parameter) or a maximum of 1 MB of data"; the page that reaches it ends with the item that did, and
    LastEvaluatedKey names it. Items under a megabyte together come in one page, and each page holds what was
    stored when it was read."""
    table = memory()
    big = "x" * 300_000  # four of them pass a megabyte (1,048,576 bytes)
    for sk in ("a", "b", "c", "d", "e"):
        table.put_item(Item={"pk": "p", "sk": sk, "v": big})
    first = table.query(KeyConditionExpression=Key("pk").eq("p"))
    assert [i["sk"] for i in first["Items"]] == ["a", "b", "c", "d"]
    assert first["LastEvaluatedKey"] == {"pk": "p", "sk": "d"} and first["ScannedCount"] == 4
    rest = table.query(KeyConditionExpression=Key("pk").eq("p"), ExclusiveStartKey=first["LastEvaluatedKey"])
    assert [i["sk"] for i in rest["Items"]] == ["e"] and "LastEvaluatedKey" not in rest
    table.delete_item(Key={"pk": "p", "sk": "e"})
    table.delete_item(Key={"pk": "p", "sk": "d"})
    table.put_item(Item={"pk": "p", "sk": "c", "v": "y"})
    whole = table.query(KeyConditionExpression=Key("pk").eq("p"))
    assert [(i["sk"], len(i["v"])) for i in whole["Items"]] == [("a", 300_000), ("b", 300_000), ("c", 1)]
    assert "LastEvaluatedKey" not in whole and whole["Count"] == whole["ScannedCount"] == 3


def test_values_of_different_types_never_compare() -> None:
    """Moto differs: it raises TypeError (a 500) for ``s > :one`` when ``s`` is a string. DynamoDB: "<, <=, >, >=
    ... true if a is less than b" only between values of the same type; otherwise the condition is false
    ("Comparison operator and function reference"), so the write fails its condition."""
    table = memory()
    table.put_item(Item=STORED)
    with pytest.raises(ClientError) as info:
        table.put_item(Item=STORED, ConditionExpression=Attr("s").gt(1))
    assert info.value.response["Error"]["Code"] == "ConditionalCheckFailedException"
    table.put_item(Item=STORED, ConditionExpression=~Attr("s").gt(1) & Attr("s").ne(1))


@pytest.mark.parametrize("copy_reads", [True, False])
def test_writes_never_change_an_item_already_read(copy_reads: bool) -> None:
    kernel = Kernel(seed=1)
    table = MemoryDynamo(kernel, Faults(kernel), copy_reads=copy_reads).table("state")
    table.put_item(Item={**K, "m": {"a": [1]}})
    before = table.get_item(Key=K)["Item"]
    table.update_item(
        Key=K, UpdateExpression="SET #m.#b = :b", ExpressionAttributeNames={"#m": "m", "#b": "b"},
        ExpressionAttributeValues={":b": 2},
    )  # fmt: skip
    assert before == {**K, "m": {"a": [Decimal(1)]}}
    assert table.get_item(Key=K)["Item"]["m"] == {"a": [Decimal(1)], "b": Decimal(2)}
    if copy_reads:
        before["m"]["a"].append(9)  # the caller's copy only
        assert table.peek("p", "a") == {**K, "m": {"a": [Decimal(1)], "b": Decimal(2)}}


def test_numbers_come_back_with_zeroes_trimmed() -> None:
    """Moto differs: it answers a number as it was sent (``1.50``). DynamoDB: "Leading and trailing zeroes are
    trimmed" ("Supported data types and naming rules in Amazon DynamoDB", Number)."""
    table = memory()
    table.put_item(
        Item={**K, "a": Decimal("1.50"), "b": Decimal("1000.0"), "c": Decimal("-0.0"), "l": [Decimal("2.0")]}
    )
    item = table.get_item(Key=K)["Item"]
    assert [str(item[k]) for k in ("a", "b", "c")] == ["1.5", "1000", "0"] and str(item["l"][0]) == "2"


def test_items_over_400_kb_are_refused() -> None:
    table = memory()
    big = "x" * (400 * 1024)
    with pytest.raises(ClientError, match="Item size has exceeded"):
        table.put_item(Item={**K, "big": big})
    table.put_item(Item={**K, "half": big[: 200 * 1024]})
    grow = {"Key": K, "UpdateExpression": "SET #b = :b", "ExpressionAttributeNames": {"#b": "b"}}
    with pytest.raises(ClientError, match="Item size has exceeded"):
        table.update_item(**grow, ExpressionAttributeValues={":b": big[: 201 * 1024]})
    with pytest.raises(ClientError) as cancelled:
        transact({"Update": {**grow, "ExpressionAttributeValues": {":b": big[: 201 * 1024]}}})(table)
    assert cancelled.value.response["CancellationReasons"][0]["Code"] == "ValidationError"
    assert set(table.peek("p", "a") or {}) == {"pk", "sk", "half"}


def test_stale_reads_under_the_fault_see_the_last_second_as_it_was() -> None:
    """DynamoDB "Read consistency": an eventually consistent read may miss a write completed just before it; a
    strongly consistent one never does."""
    kernel = Kernel(seed=1)
    faults = Faults(kernel)
    table = MemoryDynamo(kernel, faults).table("state")
    for sk, v in (("a", 1), ("b", 1), ("c", 1)):
        table.put_item(Item={"pk": "p", "sk": sk, "v": v})
    kernel.run(until=100)
    table.put_item(Item={"pk": "p", "sk": "a", "v": 2})  # changed
    table.delete_item(Key={"pk": "p", "sk": "b"})  # deleted
    table.put_item(Item={"pk": "p", "sk": "d", "v": 1})  # created
    faults.add(FaultWindow("dynamodb", "GetItem", 100, 200, "StaleRead"))
    faults.add(FaultWindow("dynamodb", "Query", 100, 200, "StaleRead"))
    key = Key("pk").eq("p")

    def seen(**kwargs: Any) -> list[tuple[str, int]]:
        return [(i["sk"], int(i["v"])) for i in table.query(KeyConditionExpression=key, **kwargs)["Items"]]

    assert seen() == [("a", 1), ("b", 1), ("c", 1)]
    assert seen(ScanIndexForward=False, ExclusiveStartKey={"pk": "p", "sk": "c"}) == [("b", 1), ("a", 1)]
    assert seen(ConsistentRead=True) == [("a", 2), ("c", 1), ("d", 1)]
    assert table.get_item(Key={"pk": "p", "sk": "a"})["Item"]["v"] == 1
    assert "Item" not in table.get_item(Key={"pk": "p", "sk": "d"})
    assert table.get_item(Key={"pk": "p", "sk": "a"}, ConsistentRead=True)["Item"]["v"] == 2
    kernel.run(until=101.5)  # more than a second after the writes: caught up
    assert seen() == [("a", 2), ("c", 1), ("d", 1)]
    assert Store(table, "x").get("LOCK", consistent=False) is None  # the adapter's reads pass through


def test_the_dynamo_is_a_service_resource_too() -> None:
    kernel = Kernel(seed=1)
    dynamo = MemoryDynamo(kernel, Faults(kernel))
    table = dynamo.Table("state")
    assert table is dynamo.table("state") and table.name == "state" and dynamo.meta.client is table.meta.client


def race(acquire: Callable[[Store, str], bool]) -> list[str]:
    """Holder ``a`` acquires; when its write begins, ``b`` runs a whole acquisition (a preemption point)."""
    kernel = Kernel(seed=1)
    dynamo = MemoryDynamo(kernel, Faults(kernel))
    store = Store(dynamo.table("state"), "demo")
    winners: list[str] = []

    def competitor(operation: str) -> None:
        if operation in ("PutItem", "TransactWriteItems") and not winners:
            dynamo.before_call.clear()
            if acquire(store, "b"):
                winners.append("b")

    dynamo.before_call.append(competitor)
    if acquire(store, "a"):
        winners.append("a")
    return winners


def test_a_preemption_point_shows_a_lock_that_is_not_atomic() -> None:
    def lease_lock(store: Store, holder: str) -> bool:
        try:
            LeaseLock(store, clock=lambda: 1000.0).acquire(holder, "refresh", 60)
        except LockHeldError:
            return False
        return True

    def check_then_write(store: Store, holder: str) -> bool:  # the read and the write are two steps, unconditioned
        if store.get("LOCK") is not None:
            return False
        store.put("LOCK", {"holder": holder, "fencing": 1, "lease_expires_at": 1060})
        return True

    assert race(lease_lock) == ["b"]  # the conditional write refuses a once b holds the lock
    assert race(check_then_write) == ["b", "a"]  # both believe they hold it
