"""The in-memory DynamoDB where moto cannot show what DynamoDB does (``test_dynamo.py`` compares the two side by
side): injected faults, the invariant checker's accessors and listeners, boto3's refusals before a call, pages cut
at a megabyte, items over 400 KB, stale reads, and a lock whose conditional write is not atomic.
"""

import random
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import botocore.session
import pytest
from boto3.dynamodb.conditions import Attr, Key
from botocore.exceptions import ClientError

from adapters.dynamo.lock import LeaseLock
from adapters.dynamo.store import Store
from core.exceptions import LockHeldError, StoreUnavailableError
from sim.dynamo import MemoryDynamo, MemoryTable
from sim.dynamo_calls import _exceptions
from sim.faults import Faults, FaultWindow
from sim.kernel import Kernel

Call = Callable[[Any], Any]
K = {"pk": "p", "sk": "a"}
STORED = {**K, "v": 1, "s": "abc", "l": [1, 2], "ss": {"x"}}


def memory() -> MemoryTable:
    kernel = Kernel(seed=3)
    return MemoryDynamo(kernel, Faults(kernel)).table("state")


def transact(*items: dict[str, Any]) -> Call:
    def call(t: Any) -> Any:
        return t.meta.client.transact_write_items(
            TransactItems=[{k: {"TableName": t.name, **v} for k, v in item.items()} for item in items]
        )

    return call


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


def test_a_query_answers_the_items_as_written_last_after_any_writes() -> None:
    # the table keeps each partition's items in sort-key order beside the keys (a Query under a page answers a slice
    # of them): puts, rewrites, updates, deletes and transactions in any order keep the two in step
    rng = random.Random(7)
    kernel = Kernel(seed=3)
    table = MemoryDynamo(kernel, Faults(kernel), copy_reads=False).table("state")
    model: dict[tuple[str, str], int] = {}
    for n in range(600):
        pk, sk = rng.choice("pq"), f"{rng.choice(['N#', 'C#', 'M'])}{rng.randrange(40)}"
        action = rng.random()
        if action < 0.5:
            table.put_item(Item={"pk": pk, "sk": sk, "n": n})
            model[pk, sk] = n
        elif action < 0.7 and (pk, sk) in model:
            table.update_item(
                Key={"pk": pk, "sk": sk}, UpdateExpression="SET n = :n", ExpressionAttributeValues={":n": n}
            )
            model[pk, sk] = n
        elif action < 0.8:
            table.meta.client.transact_write_items(
                TransactItems=[{"Put": {"TableName": "state", "Item": {"pk": pk, "sk": sk, "n": n}}}]
            )
            model[pk, sk] = n
        else:
            table.delete_item(Key={"pk": pk, "sk": sk})
            model.pop((pk, sk), None)
        for prefix in ("", "N#", "C#"):
            key = Key("pk").eq(pk) & Key("sk").begins_with(prefix) if prefix else Key("pk").eq(pk)
            got = [(i["sk"], i["n"]) for i in table.query(KeyConditionExpression=key)["Items"]]
            assert got == sorted((s, v) for (p, s), v in model.items() if p == pk and s.startswith(prefix))


def test_error_classes_are_those_a_botocore_client_has() -> None:
    client = botocore.session.Session().create_client(
        "dynamodb", region_name="us-east-1", aws_access_key_id="sim", aws_secret_access_key="sim"
    )
    made = {code: (cls.__name__, cls.__bases__) for code, cls in _exceptions()._code_to_exception.items()}
    assert made == {code: (cls.__name__, cls.__bases__) for code, cls in client.exceptions._code_to_exception.items()}
    assert _exceptions().from_code("ValidationException") is ClientError
