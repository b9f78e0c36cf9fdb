"""Make moto's DynamoDB refuse an item over 400 KB as DynamoDB does, counted as DynamoDB counts it.

moto 5.2 refuses an item over 405,000 bytes by a count of its own: no 3 bytes per list or map nor 1 byte per element,
a number as its decimal characters (``moto.dynamodb.models.dynamo_type``). DynamoDB counts those ("DynamoDB item sizes
and formats") and refuses over 409,600 bytes (400 KB, binary units). A ``RUN#`` item's rows are many short lists,
which moto under-counts: an item DynamoDB refuses can pass moto (``test_runs_size``). ``refuse_as_dynamodb`` answers a
PutItem or a TransactWriteItems whose item is over the limit by ``core.itemsize``'s count the way DynamoDB does
(ValidationException, "Item size has exceeded the maximum allowed size") before moto sees it.
"""

from __future__ import annotations

import json
from typing import Any

from boto3.dynamodb.types import TypeDeserializer

from core.itemsize import DYNAMODB_ITEM_LIMIT_BYTES, item_bytes

TOO_LARGE = "Item size has exceeded the maximum allowed size"


class _Answer:
    """What botocore reads of an HTTP answer that an event handler gives instead of the call."""

    status_code = 400
    content = b""


def _items(operation: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    if operation == "PutItem":
        return [body.get("Item") or {}]
    if operation == "TransactWriteItems":
        return [w["Put"]["Item"] for w in body.get("TransactItems", []) if "Put" in w]
    return []


def refuse_as_dynamodb(client: Any) -> None:
    """Register the check on ``client`` (a DynamoDB client, e.g. ``table.meta.client``)."""
    des = TypeDeserializer()

    def check(model: Any, params: dict[str, Any], **_: Any) -> tuple[_Answer, dict[str, Any]] | None:
        body = json.loads(params.get("body") or b"{}")
        for item in _items(model.name, body):
            if item_bytes({k: des.deserialize(v) for k, v in item.items()}) > DYNAMODB_ITEM_LIMIT_BYTES:
                error = {"Code": "ValidationException", "Message": TOO_LARGE}
                return _Answer(), {"Error": error, "ResponseMetadata": {"HTTPStatusCode": 400}}
        return None

    client.meta.events.register("before-call.dynamodb", check)
