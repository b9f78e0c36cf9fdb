"""TransactWriteItems for the in-memory DynamoDB: the client a ``MemoryTable``'s ``meta.client`` is.

Follows the DynamoDB API Reference, "TransactWriteItems", and the Developer Guide, "Amazon DynamoDB Transactions: How
it works": up to 100 actions (ConditionCheck, Put, Update, Delete), at most one per item, on tables of the same
account; every condition is evaluated on the items as stored, then all actions apply or none. A cancelled
transaction answers TransactionCanceledException with one CancellationReason per action, in order: ``Code``
"None", "ConditionalCheckFailed" (``Item`` in DynamoDB JSON with ``ReturnValuesOnConditionCheckFailure=ALL_OLD``)
or "ValidationError"; an injected TransactionConflict / ThrottlingError fault lands on one action drawn from the
kernel's ``dynamodb:conflicts`` stream. ClientRequestToken idempotency is not modelled.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from sim.dynamo_calls import RequestError, client_error, metadata, validation
from sim.dynamo_write import Sizing, Write
from sim.expression_syntax import EvaluationError, ExpressionError
from sim.values import Item

if TYPE_CHECKING:
    from sim.dynamo import MemoryDynamo, MemoryTable

MAX_TRANSACTION_ITEMS = 100
ACTIONS = ("ConditionCheck", "Put", "Update", "Delete")


class MemoryClient:
    """The low-level client a table's ``meta.client`` is: ``transact_write_items`` (values as the resource layer
    takes them: Python values, expressions as strings with placeholders)."""

    def __init__(self, dynamo: MemoryDynamo) -> None:
        self.dynamo = dynamo

    def transact_write_items(
        self,
        *,
        TransactItems: list[Mapping[str, Any]],  # boto3's parameter name
        **_: Any,
    ) -> dict[str, Any]:
        """All the actions or none ("TransactWriteItems"; see ``MemoryDynamo``'s module docstring).

        Raises:
            TransactionCanceledException: a condition failed (or an injected conflict); nothing was written.
            ClientError: ValidationException (malformed, two actions on one item), ResourceNotFoundException.
        """
        operation = "TransactWriteItems"
        request_id = self.dynamo.begin(operation)
        try:
            writes = list(self._writes(TransactItems))
        except (RequestError, ExpressionError) as err:
            code, message = (
                (err.code, err.message) if isinstance(err, RequestError) else ("ValidationException", str(err))
            )
            raise client_error(code, operation, request_id, message) from None
        reasons: list[dict[str, Any]] = []
        results: list[tuple[Item | None, Sizing]] = []
        for table, write in writes:
            old = table.stored(write.key)
            reason: dict[str, Any] = {"Code": "None"}
            try:
                if write.holds(old):
                    new = write.result(old)
                    results.append((new, write.sized(new, old, table.sizing(write.key))))
                else:
                    reason = {"Code": "ConditionalCheckFailed", "Message": "The conditional request failed"}
                    if item := write.failure_item(old):
                        reason["Item"] = item
            except (EvaluationError, RequestError) as err:  # this item's: the transaction is cancelled
                reason = {"Code": "ValidationError", "Message": str(err)}
            except ExpressionError as err:
                raise client_error("ValidationException", operation, request_id, str(err)) from None
            reasons.append(reason)
        injected = self.dynamo.injected_cancellation()
        if injected is not None:
            reasons[self.dynamo.pick(len(reasons))] = {"Code": injected, "Message": f"injected {injected}"}
        codes = [r["Code"] for r in reasons]
        if any(code != "None" for code in codes):
            message = (
                f"Transaction cancelled, please refer cancellation reasons for specific reasons [{', '.join(codes)}]"
            )
            extra = {"CancellationReasons": reasons}
            raise client_error("TransactionCanceledException", operation, request_id, message, extra)
        for (table, write), (new, sized) in zip(writes, results, strict=True):
            if write.kind != "ConditionCheck":
                table.store(write.key, new, *sized)
        return {"ResponseMetadata": metadata(request_id)}

    def _writes(self, items: list[Mapping[str, Any]]) -> Iterator[tuple[MemoryTable, Write]]:
        if not 1 <= len(items) <= MAX_TRANSACTION_ITEMS:
            raise validation(
                f"1 validation error detected: Value at 'transactItems' failed to satisfy constraint: Member must "
                f"have length less than or equal to {MAX_TRANSACTION_ITEMS}"
            )
        seen: set[tuple[str, str, str]] = set()
        for entry in items:
            kinds = [k for k in ACTIONS if k in entry]
            if len(kinds) != 1:
                raise validation("TransactItems can only contain one of Check, Put, Update or Delete")
            params = entry[kinds[0]]
            table = self.dynamo.tables.get(params.get("TableName", ""))
            if table is None:
                raise RequestError("ResourceNotFoundException", "Requested resource not found")
            write = table.write(kinds[0], params)
            if (table.name, *write.key) in seen:
                raise validation("Transaction request cannot include multiple operations on one item")
            seen.add((table.name, *write.key))
            yield table, write
