"""The deployment's DynamoDB table: one partition per cluster, items keyed by kind.

Keys (see DESIGN.md, "Table items"): ``pk = CLUSTER#<cluster>`` and ``sk`` one of ``LOCK``,
``NODE#<instance-id>``, ``CMD#<command-id>``, ``COMP#<asg>``, ``RUN#<run-id>``, ``DETACH#<instance-id>``,
``HOOK#<instance-id>``. Items that may go stale carry ``expires_at`` (epoch seconds, the table's TTL attribute),
but readers never rely on TTL deletion: they compare timestamps themselves.

This module is the low-level access (get, put, update, delete, query, with optional conditions); one module per
item kind builds on it (``commands``, ``nodes``, ``detach``, ``hooks``, ``ledger``, ``runs``, ``lock``).

Errors: conditional writes that lose raise typed ``ConflictError`` subclasses carrying the current item
(``ReturnValuesOnConditionCheckFailure=ALL_OLD``); throttling, 5xx and connection failures raise
``StoreUnavailableError`` (so do an answer botocore cannot parse and a Query answer without ``Items``); any other
refusal ``AwsRequestError``. Each is raised ``from`` the botocore error.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from boto3.dynamodb.conditions import Attr, ConditionBase, Key
from boto3.dynamodb.types import TypeDeserializer
from botocore.exceptions import BotoCoreError, ClientError
from botocore.parsers import ResponseParserError

from adapters.aws.calls import CONNECTION_ERRORS, error_of, retryable, unparsed
from core.exceptions import AwsRequestError, ConflictError, StoreUnavailableError

__all__ = ["Attr", "Table", "dynamo", "plain", "translate"]


def plain(value: Any) -> Any:
    """DynamoDB values back to plain Python (Decimal → int or float)."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def dynamo(value: Any) -> Any:
    """Plain Python to DynamoDB values (float → Decimal; None values dropped from maps)."""
    if isinstance(value, float):
        return Decimal(str(value))
    if isinstance(value, dict):
        return {k: dynamo(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [dynamo(v) for v in value]
    return value


# what a table call may raise from botocore: an error answer, a botocore error, an answer it cannot parse
TABLE_ERRORS = (ClientError, BotoCoreError, ResponseParserError)


def translate(
    err: BotoCoreError | ClientError | ResponseParserError, message: str, conflict: type[ConflictError] = ConflictError
) -> Exception:
    """The project's exception for a failed table call (to be raised ``from err``).

    Returns:
        ``conflict`` (with the current item) for a lost condition; ``StoreUnavailableError`` for a retryable answer
        (``adapters.aws.calls.RETRYABLE_CODES``, 5xx), no connection or an unparseable answer; ``AwsRequestError``
        otherwise.
    """
    if isinstance(err, ResponseParserError):
        return StoreUnavailableError(f"{message}: {unparsed(err)}")
    if isinstance(err, BotoCoreError):
        if isinstance(err, CONNECTION_ERRORS):
            return StoreUnavailableError(f"{message}: {type(err).__name__}")
        return AwsRequestError("DynamoDB", type(err).__name__, f"{message}: {err}")
    code, text = error_of(err)
    if code == "ConditionalCheckFailedException":
        item: Any = err.response.get("Item")  # ALL_OLD: the item as it is, in DynamoDB JSON
        current = None
        if item:
            des = TypeDeserializer()
            current = plain({k: des.deserialize(v) for k, v in item.items()})
        return conflict(message, current)
    if retryable(err):
        return StoreUnavailableError(f"{message}: {code}")
    return AwsRequestError("DynamoDB", code, f"{message}: {text}")


class Table:
    """Typed access to one cluster's partition of the table.

    Args:
        table: a boto3 ``dynamodb.Table`` resource (built by the entry point, so tests pass a local one).
        cluster: the cluster name.
    """

    def __init__(self, table: Any, cluster: str) -> None:
        self.table = table
        self.cluster = cluster
        self.pk = f"CLUSTER#{cluster}"

    def get(self, sk: str, consistent: bool = True) -> dict[str, Any] | None:
        """The item ``sk`` as plain values, or None."""
        try:
            out = self.table.get_item(Key={"pk": self.pk, "sk": sk}, ConsistentRead=consistent)
        except TABLE_ERRORS as err:
            raise translate(err, f"get {sk}") from err
        item = out.get("Item")
        return None if item is None else plain(item)

    def query_prefix(self, prefix: str, consistent: bool = False) -> Iterator[dict[str, Any]]:
        """All items whose sort key starts with ``prefix``, following pagination."""
        return self._query(Key("pk").eq(self.pk) & Key("sk").begins_with(prefix), consistent, f"query {prefix}")

    def query_partition(self, consistent: bool = False) -> Iterator[dict[str, Any]]:
        """Every item of the cluster's partition (LOCK, NODE#, CMD#, COMP#, RUN#, DETACH#, HOOK#), following
        pagination (DynamoDB returns up to 1 MB a call): one read of the whole state."""
        return self._query(Key("pk").eq(self.pk), consistent, "query partition")

    def _query(self, key: ConditionBase, consistent: bool, message: str) -> Iterator[dict[str, Any]]:
        kwargs: dict[str, Any] = {"KeyConditionExpression": key, "ConsistentRead": consistent}
        while True:
            try:
                out = self.table.query(**kwargs)
            except TABLE_ERRORS as err:
                raise translate(err, message) from err
            if "Items" not in out:
                # every Query answer has Items (maybe empty); botocore reads a 200 whose body is not JSON as {}, which
                # must not pass for an empty partition
                raise StoreUnavailableError(f"{message}: an answer without Items (unreadable body)")
            for item in out["Items"]:
                yield plain(item)
            if "LastEvaluatedKey" not in out:
                return
            kwargs["ExclusiveStartKey"] = out["LastEvaluatedKey"]

    def put(
        self,
        sk: str,
        attrs: dict[str, Any],
        condition: ConditionBase | None = None,
        conflict: type[ConflictError] = ConflictError,
    ) -> None:
        """Write the whole item ``sk`` (if ``condition`` holds).

        Raises:
            ConflictError (``conflict``): the condition failed; ``current`` holds the item.
        """
        kwargs: dict[str, Any] = {"Item": dynamo({**attrs, "pk": self.pk, "sk": sk})}
        self._condition(kwargs, condition)
        try:
            self.table.put_item(**kwargs)
        except TABLE_ERRORS as err:
            raise translate(err, f"put {sk}", conflict) from err

    def delete(
        self, sk: str, condition: ConditionBase | None = None, conflict: type[ConflictError] = ConflictError
    ) -> None:
        """Delete the item ``sk`` (if ``condition`` holds; deleting an absent item is not an error)."""
        kwargs: dict[str, Any] = {"Key": {"pk": self.pk, "sk": sk}}
        self._condition(kwargs, condition)
        try:
            self.table.delete_item(**kwargs)
        except TABLE_ERRORS as err:
            raise translate(err, f"delete {sk}", conflict) from err

    def update(
        self,
        sk: str,
        values: dict[str, Any],
        condition: ConditionBase | None = None,
        conflict: type[ConflictError] = ConflictError,
    ) -> dict[str, Any]:
        """Set the given attributes (None removes one); returns the item after the update."""
        sets = {k: v for k, v in values.items() if v is not None}
        removes = [k for k, v in values.items() if v is None]
        names = {f"#upd{i}": k for i, k in enumerate(values)}
        rev = {k: n for n, k in names.items()}
        expr = []
        if sets:
            expr.append("SET " + ", ".join(f"{rev[k]} = :upd{i}" for i, k in enumerate(sets)))
        if removes:
            expr.append("REMOVE " + ", ".join(rev[k] for k in removes))
        kwargs: dict[str, Any] = {
            "Key": {"pk": self.pk, "sk": sk},
            "UpdateExpression": " ".join(expr),
            "ExpressionAttributeNames": names,
            "ReturnValues": "ALL_NEW",
        }
        if sets:
            kwargs["ExpressionAttributeValues"] = {f":upd{i}": dynamo(v) for i, v in enumerate(sets.values())}
        self._condition(kwargs, condition)
        try:
            out = self.table.update_item(**kwargs)
        except TABLE_ERRORS as err:
            raise translate(err, f"update {sk}", conflict) from err
        return dict(plain(out.get("Attributes", {})))

    @staticmethod
    def _condition(kwargs: dict[str, Any], condition: ConditionBase | None) -> None:
        if condition is not None:
            kwargs["ConditionExpression"] = condition
            kwargs["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
