"""Low-level table access: values converted both ways, errors translated by cause (moto's DynamoDB and fakes)."""

from decimal import Decimal

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from adapters.dynamo.store import Store
from adapters.dynamo.table import Attr, Table, dynamo, plain, translate
from core.exceptions import AwsRequestError, CommandExistsError, ConflictError, StoreUnavailableError


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
    assert store.update("X#1", {"n": 3, "gone": None}) == {"pk": "CLUSTER#demo", "sk": "X#1", "n": 3}
    store.delete("X#1")
    assert store.get("X#1") is None and list(store.query_partition()) == []
