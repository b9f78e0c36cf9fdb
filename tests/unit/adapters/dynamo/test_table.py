"""Low-level table access: values converted both ways, errors translated by cause (moto's DynamoDB and fakes)."""

from decimal import Decimal

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from adapters.dynamo.lock import LeaseLock
from adapters.dynamo.store import Store
from adapters.dynamo.table import Attr, Table, dynamo, plain, translate, translate_fenced
from core.exceptions import (
    AwsRequestError,
    CommandExistsError,
    ConflictError,
    LockLostError,
    StoreUnavailableError,
)
from core.lock import Lease


def client_error(code: str, status: int = 400, item: dict | None = None) -> ClientError:
    response: dict = {"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}}
    if item is not None:
        response["Item"] = item
    return ClientError(response, "PutItem")


def test_values_round_trip() -> None:
    assert dynamo({"a": 1.5, "b": None, "c": [0.25, 2]}) == {"a": Decimal("1.5"), "c": [Decimal("0.25"), 2]}
    assert plain({"a": Decimal("3"), "b": [Decimal("0.5")]}) == {"a": 3, "b": [0.5]}


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (client_error("ProvisionedThroughputExceededException"), StoreUnavailableError),
        (client_error("ThrottlingException"), StoreUnavailableError),
        (client_error("SomethingNew", 503), StoreUnavailableError),
        (EndpointConnectionError(endpoint_url="https://dynamodb"), StoreUnavailableError),
        (client_error("AccessDeniedException"), AwsRequestError),
        (client_error("ValidationException"), AwsRequestError),
    ],
)
def test_errors_are_translated_by_cause(error: Exception, expected: type[Exception]) -> None:
    assert isinstance(translate(error, "put X"), expected)  # type: ignore[arg-type]  # parametrized union


def test_a_lost_condition_carries_the_current_item() -> None:
    err = translate(
        client_error("ConditionalCheckFailedException", item={"status": {"S": "running"}}), "put", CommandExistsError
    )
    assert isinstance(err, CommandExistsError) and err.current == {"status": "running"}


class Raising:
    def __init__(self, error: Exception) -> None:
        self.error = error

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]  # any table method
        def call(**_: object) -> None:
            raise self.error

        return call


def test_every_call_raises_from_the_botocore_error() -> None:
    err = client_error("ThrottlingException")
    table = Table(Raising(err), "demo")
    for attempt in (lambda: table.get("X"), lambda: list(table.query_prefix("X")), lambda: table.put("X", {})):
        with pytest.raises(StoreUnavailableError) as info:
            attempt()
        assert info.value.__cause__ is err


def test_conditional_writes_on_moto(store: Store) -> None:
    store.put("X#1", {"n": 1}, condition=Attr("pk").not_exists())
    with pytest.raises(ConflictError) as info:
        store.put("X#1", {"n": 2}, condition=Attr("pk").not_exists())
    assert info.value.current is not None and info.value.current["n"] == 1
    assert store.updated("X#1", {"n": 3, "gone": None}) == {"pk": "CLUSTER#demo", "sk": "X#1", "n": 3}
    sent: list[dict[str, object]] = []
    store.table.meta.client.meta.events.register(
        "provide-client-params.dynamodb.UpdateItem", lambda params, **_: sent.append(dict(params))
    )
    assert store.update("X#1", {"n": 4}) is None  # nothing asked back: the callers that discard the item
    assert sent[-1]["ReturnValues"] == "NONE" and store.get("X#1") == {"pk": "CLUSTER#demo", "sk": "X#1", "n": 4}
    store.delete("X#1")
    assert store.get("X#1") is None and list(store.query_partition()) == []


# -- fenced writes (a TransactWriteItems with a ConditionCheck on LOCK) ----------------------------------------------


def _leases(store: Store):
    """The lease of ``old``, then the one ``new`` took over once it had expired (fencing 1, then 2)."""
    old = LeaseLock(store, clock=lambda: 1000.0).acquire("old", "replenish", 10)
    new = LeaseLock(store, clock=lambda: 2000.0).acquire("new", "refresh", 10)
    return old, new


def test_a_fenced_put_applies_while_the_lease_is_current(store: Store) -> None:
    lease = LeaseLock(store, clock=lambda: 1000.0).acquire("me", "replenish", 10)
    store.put("COMP#a", {"version": 1, "ratio": 1.5}, condition=Attr("pk").not_exists(), fence=lease)
    assert store.get("COMP#a") == {"pk": "CLUSTER#demo", "sk": "COMP#a", "version": 1, "ratio": 1.5}


def test_a_fenced_put_with_a_stale_token_is_refused_and_applies_nothing(store: Store) -> None:
    old, new = _leases(store)
    with pytest.raises(LockLostError) as info:
        store.put("COMP#a", {"version": 1}, fence=old)
    assert store.get("COMP#a") is None
    assert info.value.current is not None and info.value.current["holder"] == "new"
    assert info.value.current["fencing"] == new.fencing == old.fencing + 1
    assert "fencing 1" in str(info.value) and "new" in str(info.value)


def test_a_fenced_put_after_the_lock_was_released_is_refused(store: Store) -> None:
    lock = LeaseLock(store, clock=lambda: 1000.0)
    lease = lock.acquire("me", "replenish", 10)
    lock.release(lease)
    with pytest.raises(LockLostError):
        store.put("RUN#r", {"version": 1}, fence=lease)
    assert store.get("RUN#r") is None


def test_a_fenced_put_without_any_lock_item_is_refused(store: Store) -> None:
    with pytest.raises(LockLostError) as info:
        store.put("COMP#a", {"version": 1}, fence=Lease("ghost", "replenish", 3, 0.0))
    assert info.value.current is None and store.get("COMP#a") is None


def test_a_fenced_put_whose_own_condition_fails_raises_its_conflict(store: Store) -> None:
    lease = LeaseLock(store, clock=lambda: 1000.0).acquire("me", "replenish", 10)
    store.put("CMD#c", {"status": "queued"})
    with pytest.raises(CommandExistsError) as info:
        store.put("CMD#c", {"status": "other"}, Attr("pk").not_exists(), CommandExistsError, fence=lease)
    assert info.value.current is not None and info.value.current["status"] == "queued"


def test_a_lost_lock_wins_over_the_item_s_own_conflict(store: Store) -> None:
    old, _ = _leases(store)
    store.put("CMD#c", {"status": "queued"})
    with pytest.raises(LockLostError):
        store.put("CMD#c", {"status": "other"}, Attr("pk").not_exists(), CommandExistsError, fence=old)
    assert store.get("CMD#c")["status"] == "queued"


@pytest.mark.parametrize(
    ("reasons", "expected"),
    [
        ([{"Code": "None"}, {"Code": "TransactionConflict"}], StoreUnavailableError),
        ([{"Code": "None"}, {"Code": "ValidationError"}], AwsRequestError),
    ],
)
def test_other_cancelled_transactions_are_translated(reasons, expected) -> None:
    err = ClientError(
        {"Error": {"Code": "TransactionCanceledException", "Message": "cancelled"}, "CancellationReasons": reasons},
        "TransactWriteItems",
    )
    assert isinstance(translate_fenced(err, "put X", ConflictError, Lease("h", "op", 1, 0.0)), expected)


def test_plain_converts_nested_numbers_and_keeps_the_rest() -> None:
    item = {
        "s": "x",
        "b": True,
        "n": None,
        "d": Decimal("2"),
        "f": Decimal("0.5"),
        "m": {"deep": [Decimal("1"), {"e": Decimal("1.25")}], "t": "y"},
        "l": ["a", Decimal("4")],
    }
    converted = plain(item)
    assert converted == {
        "s": "x",
        "b": True,
        "n": None,
        "d": 2,
        "f": 0.5,
        "m": {"deep": [1, {"e": 1.25}], "t": "y"},
        "l": ["a", 4],
    }
    assert type(converted["d"]) is int and type(converted["f"]) is float
    assert item["d"] == Decimal("2") and item["m"]["deep"][0] == Decimal("1")  # the answer is a copy


def test_a_partition_read_leaves_out_unwanted_items_and_a_prefix_read_can_keep_the_tables_values(store: Store) -> None:
    store.put("CMD#drain-1", {"n": 1})
    store.put("CMD#surplus-1", {"n": 2})
    store.put("NODE#i-1", {"n": 3})
    read = list(store.query_partition(consistent=True, wanted=lambda sk: sk != "CMD#drain-1"))
    assert [(i["sk"], i["n"]) for i in read] == [("CMD#surplus-1", 2), ("NODE#i-1", 3)]
    assert type(read[0]["n"]) is int
    raw = list(store.query_prefix("CMD#", consistent=True, convert=False))
    assert [(i["sk"], i["n"]) for i in raw] == [("CMD#drain-1", Decimal("1")), ("CMD#surplus-1", Decimal("2"))]
    assert all(type(i["n"]) is Decimal for i in raw)
    raw_partition = list(store.query_partition(consistent=True, wanted=lambda sk: sk != "CMD#drain-1", convert=False))
    assert [(i["sk"], i["n"]) for i in raw_partition] == [("CMD#surplus-1", Decimal("2")), ("NODE#i-1", Decimal("3"))]
    assert all(type(i["n"]) is Decimal for i in raw_partition)


def test_a_kind_written_into_the_other_partition_is_never_read(store: Store) -> None:
    # the agent may write only its partition, the Lambdas theirs: a CMD# item in the cluster partition, or a COMP# one
    # in the agent's, is nobody's; a prefix read of one kind queries its own partition only, a shorter one checks
    store.put("CMD#drain-1", {"n": 1})
    store.put("COMP#nodes-a", {"n": 2})
    store.table.put_item(Item={"pk": store.pk, "sk": "CMD#forged", "n": 3})
    store.table.put_item(Item={"pk": store.agent_pk, "sk": "COMP#forged", "n": 4})
    for prefix, expected in (("CMD#", "CMD#drain-1"), ("COMP#", "COMP#nodes-a"), ("C", "COMP#nodes-a")):
        assert [i["sk"] for i in store.query_prefix(prefix, consistent=True)] == [expected]


def test_attributes_read_as_answered(store: Store) -> None:
    store.put("RUN#r1", {"rows": [[0, 1, "i-1"]], "version": 3})
    for item in (
        store.get("RUN#r1", as_is=("rows",)),
        next(store.query_prefix("RUN#", consistent=True, as_is=("rows",))),
        next(store.query_range("RUN#", "RUN$", consistent=True, as_is=("rows",))),
    ):
        assert item is not None and type(item["version"]) is int
        assert item["rows"] == [[0, 1, "i-1"]] and type(item["rows"][0][0]) is Decimal
