"""What a failed table call raises: botocore's errors mapped to the project's exceptions by cause.

A conditional write that loses raises a ``ConflictError`` subclass carrying the current item (the call asks for
``ReturnValuesOnConditionCheckFailure=ALL_OLD``); throttling, 5xx and connection failures raise
``StoreUnavailableError`` (so does an answer botocore cannot parse); any other refusal ``AwsRequestError``. A
cancelled transaction (``TransactionCanceledException``) is read by its ``CancellationReasons``, one per action in
order (TransactWriteItems API reference). The caller raises the result ``from`` the botocore error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from boto3.dynamodb.types import TypeDeserializer
from botocore.exceptions import BotoCoreError, ClientError
from botocore.parsers import ResponseParserError

from adapters.aws.calls import CONNECTION_ERRORS, error_of, retryable, unparsed
from adapters.dynamo.values import plain
from core.exceptions import AwsRequestError, ConflictError, LockHeldError, LockLostError, StoreUnavailableError
from core.lock import Lease, describe

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
        return conflict(message, item_of_answer(err.response.get("Item")))  # ALL_OLD: the item as it is
    if retryable(err):
        return StoreUnavailableError(f"{message}: {code}")
    return AwsRequestError("DynamoDB", code, f"{message}: {text}")


def item_of_answer(item: Any) -> dict[str, Any] | None:
    """An item in DynamoDB JSON (as an error answer carries it) as plain values; None for none."""
    if not item:
        return None
    des = TypeDeserializer()
    return dict(plain({k: des.deserialize(v) for k, v in item.items()}))


def translate_fenced(
    err: BotoCoreError | ClientError | ResponseParserError,
    message: str,
    conflict: type[ConflictError],
    fence: Lease,
    taking: bool = False,
    also: Sequence[type[ConflictError]] = (),
) -> Exception:
    """``translate`` for a fenced write (a transaction of the ``LOCK`` check, then the write, then the writes made
    with it, whose conflicts are ``also``, in order).

    Returns:
        ``LockLostError`` (``current``: the ``LOCK`` item) when the lock check failed, whatever the write's own
        condition did; ``conflict`` (``current``: the item) when the write's condition failed, whatever the writes
        after it did; ``also[k]`` (``current``: that item) when only the condition of the write made with it, k-th,
        failed (the first such);
        ``StoreUnavailableError`` for a transaction conflict with another one in flight (retryable, as AWS advises);
        ``AwsRequestError`` with code ``ValidationError`` when a write was invalid (an item over 400 KB: "An item size
        becomes too large", TransactWriteItems API reference); else as ``translate``.
    """
    if not isinstance(err, ClientError) or error_of(err)[0] != "TransactionCanceledException":
        return translate(err, message, conflict)
    reasons: list[Any] = list(err.response.get("CancellationReasons") or [])
    codes = [str(r.get("Code", "None")) for r in reasons]
    if codes and codes[0] == "ConditionalCheckFailed":
        lock = item_of_answer(reasons[0].get("Item"))
        if taking:
            return LockHeldError(f"{message}: lock held by {describe(lock)}", lock)
        return LockLostError(
            f"{message}: lease of {fence.holder} (fencing {fence.fencing}) lost to {describe(lock)}", lock
        )
    if len(codes) > 1 and codes[1] == "ConditionalCheckFailed":
        return conflict(message, item_of_answer(reasons[1].get("Item")))
    for k, other in enumerate(also):
        if len(codes) > 2 + k and codes[2 + k] == "ConditionalCheckFailed":
            return other(f"{message}: item {2 + k} of the transaction", item_of_answer(reasons[2 + k].get("Item")))
    if "TransactionConflict" in codes or "ThrottlingError" in codes:
        return StoreUnavailableError(f"{message}: transaction cancelled ({', '.join(codes)})")
    if "ValidationError" in codes:  # e.g. an item over 400 KB: the write's own refusal, named as such
        texts = [str(r.get("Message", "")) for r in reasons if r.get("Code") == "ValidationError"]
        return AwsRequestError("DynamoDB", "ValidationError", f"{message}: {'; '.join(texts)}")
    return AwsRequestError("DynamoDB", "TransactionCanceledException", f"{message}: {', '.join(codes)}")
