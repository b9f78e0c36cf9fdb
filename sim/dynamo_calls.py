"""What the in-memory DynamoDB shares between its calls: error answers shaped as botocore raises them, a request's
expressions resolved and validated, and one conditional write (``Write``) that PutItem, UpdateItem, DeleteItem and
TransactWriteItems all apply.

Errors are the exception classes botocore builds from the DynamoDB service model (``ConditionalCheckFailedException``,
``TransactionCanceledException``, ...; a plain ``ClientError`` for codes the model does not name, such as
``ValidationException``), with the answer's shape as botocore parses it: ``Error.Code``/``Error.Message``,
``ResponseMetadata.HTTPStatusCode``, the body's ``message`` (``Message`` for TransactionCanceledException), and
``Item`` / ``CancellationReasons`` in DynamoDB JSON (botocore's resource layer does not deserialize error bodies).
Sources: the DynamoDB API Reference, "Common Errors", "PutItem" (ReturnValuesOnConditionCheckFailure) and
"TransactWriteItems" (CancellationReasons).
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from functools import lru_cache
from typing import Any, NamedTuple

import botocore.session
from boto3.dynamodb.conditions import ConditionBase, ConditionExpressionBuilder
from botocore.errorfactory import ClientExceptionsFactory
from botocore.exceptions import ClientError

from sim.condition_shapes import Shape, shape
from sim.expression_syntax import Context, EvaluationError, ExpressionError
from sim.expressions import parse_condition
from sim.updates import Update, parse_update
from sim.values import Item, canonical
from sim.values_size import sized_value

# HTTP status DynamoDB answers with ("Error handling with DynamoDB", "Error components"); other codes: 400
STATUS = {
    "InternalServerError": 500,
    "InternalFailure": 500,
    "InternalError": 500,
    "ServiceUnavailable": 503,
    "ServiceUnavailableException": 503,
}
MESSAGES = {
    "ProvisionedThroughputExceededException": "The level of configured provisioned throughput for the table was "
    "exceeded. Consider increasing your provisioning level with the UpdateTable API.",
    "ThrottlingException": "Rate of requests exceeds the allowed throughput.",
    "RequestLimitExceeded": "Throughput exceeds the current throughput limit for your account.",
    "InternalServerError": "Internal server error",
    "ConditionalCheckFailedException": "The conditional request failed",
    "ResourceNotFoundException": "Requested resource not found",
}
CONDITION_FAILED = "The conditional request failed"
CANCELLATION_CODES = ("TransactionConflict", "ThrottlingError")  # injected faults that cancel a transaction


@lru_cache(maxsize=1)
def _exceptions() -> Any:
    """The exception classes a botocore DynamoDB client has (``client.exceptions``), made as the client makes them
    (``ClientExceptionsFactory`` from the service model) without the rest of a client: loading its endpoints and
    rules cost about 0.08 s of CPU a process, a quarter of a one-node simulated day."""
    model = botocore.session.Session().get_service_model("dynamodb")
    return ClientExceptionsFactory().create_client_exceptions(model)


def client_error(
    code: str, operation: str, request_id: str, message: str | None = None, extra: Mapping[str, Any] | None = None
) -> ClientError:
    """The exception botocore raises for the error answer ``code`` to ``operation``."""
    text = message or MESSAGES.get(code, code)
    status = STATUS.get(code, 400)
    response: dict[str, Any] = {
        "Error": {"Message": text, "Code": code},
        "ResponseMetadata": metadata(request_id, status, code),
        ("Message" if code == "TransactionCanceledException" else "message"): text,
        **(extra or {}),
    }
    error_class: type[ClientError] = _exceptions().from_code(code)
    return error_class(response, operation)  # type: ignore[arg-type]  # botocore types the response as a TypedDict


def metadata(request_id: str, status: int = 200, error: str | None = None) -> dict[str, Any]:
    headers = {"content-type": "application/x-amz-json-1.0", "x-amzn-requestid": request_id}
    if error is not None:
        headers["x-amzn-errortype"] = error
    return {"RequestId": request_id, "HTTPStatusCode": status, "HTTPHeaders": headers, "RetryAttempts": 0}


class RequestError(Exception):
    """A request DynamoDB refuses as a whole: ``code`` (``ValidationException``, ``ResourceNotFoundException``)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def validation(message: str) -> RequestError:
    return RequestError("ValidationException", message)


@dataclass
class Expressions:
    """A request's expressions as strings, its placeholders (values canonical), the parsed update."""

    condition: str | None
    key_condition: str | None
    filter: str | None
    update: Update | None
    names: dict[str, str]
    values: dict[str, Any]
    # an update's values as ``ExpressionAttributeValues`` gave them, with their ``value_bytes``, by placeholder
    sizes: dict[str, tuple[Any, int]] = dataclass_field(default_factory=dict)

    def holds(self, text: str | None, item: Item) -> bool:
        return text is None or parse_condition(text).condition.holds(Context(item, self.names, self.values))


_FIELDS = ("KeyConditionExpression", "ConditionExpression", "FilterExpression")  # boto3's build order
# a request with none of these (a plain PutItem, GetItem or DeleteItem) has no expression to resolve or check
_EXPRESSION_PARAMS = (*_FIELDS, "ExpressionAttributeNames", "ExpressionAttributeValues")


def expressions(params: Mapping[str, Any], update: bool = False) -> Expressions:
    """Resolve a request's ConditionExpression / KeyConditionExpression / FilterExpression (boto3 condition objects
    are built to strings as boto3's resource layer does: one builder per request) and UpdateExpression, and check
    the placeholders as DynamoDB does: every one used is defined, every one defined is used.

    Raises:
        RequestError: ValidationException.
    """
    if not update and not any(map(params.__contains__, _EXPRESSION_PARAMS)):
        return Expressions(None, None, None, None, {}, {})  # no expression, no placeholder: nothing to check
    updating = _update_shape(params) if update else None
    if updating is not None:
        checked = _UPDATES.get(updating[0])
        if checked is not None:  # this shape was checked before: only its values are this request's
            return _updated_expressions(params, checked, updating[1])
    walked = None if update else _conditions_only(params)
    if walked is not None:
        known = _CHECKED.get(walked[0])
        if known is not None:  # this shape was built and checked before: only its values are this request's
            condition, key_condition, filter_text, names_built, placeholders = known
            values_built = dict(zip(placeholders, map(canonical, walked[1]), strict=True))
            return Expressions(condition, key_condition, filter_text, None, dict(names_built), values_built)
    names = dict(params.get("ExpressionAttributeNames") or {})
    given_values = params.get("ExpressionAttributeValues")
    if given_values is not None and not given_values:
        raise validation("ExpressionAttributeValues must not be empty")
    sizes: dict[str, tuple[Any, int]] = {}
    if update:  # each value with its size (``Write.sized``)
        values = {}
        for k, v in (given_values or {}).items():
            sizes[k] = sized = sized_value(v)
            values[k] = sized[0]
    else:
        values = {k: canonical(v) for k, v in (given_values or {}).items()}
    asked: dict[str, Any] = {field: params.get(field) for field in _FIELDS}
    conditions = [(field, condition) for field, condition in asked.items() if isinstance(condition, ConditionBase)]
    texts: dict[str, str | None] = {**asked, **_built(conditions, names, values)} if conditions else asked
    used_names: set[str] = set()
    used_values: set[str] = set()
    parsed_update = None
    try:
        for field, text in texts.items():
            if text is not None:
                parsed = parse_condition(text, field)
                used_names |= parsed.names
                used_values |= parsed.values
        if update:
            parsed_update = parse_update(params.get("UpdateExpression") or "")
            used_names |= parsed_update.names
            used_values |= parsed_update.values
    except ExpressionError as err:
        raise validation(str(err)) from err
    if not any(texts.values()) and parsed_update is None:
        for field, given in (("ExpressionAttributeNames", names), ("ExpressionAttributeValues", values)):
            if given:
                raise validation(f"{field} can only be specified when using expressions")
    _check_used("ExpressionAttributeNames", names.keys(), used_names, "attribute name used in the document path")
    _check_used("ExpressionAttributeValues", values.keys(), used_values, "attribute value used in expression")
    if updating is not None:
        _keep_update(updating[0], texts["ConditionExpression"], names, parsed_update)
    if walked is not None and (built := _BUILT.get(walked[0])) is not None:  # built from its shape, and valid
        if len(_CHECKED) >= _BUILT_KEPT:
            _CHECKED.clear()
        placeholders = tuple(p for field in built for p in field.placeholders)
        _CHECKED[walked[0]] = (
            texts["ConditionExpression"], texts["KeyConditionExpression"], texts["FilterExpression"], dict(names),
            placeholders,
        )  # fmt: skip
    return Expressions(
        texts["ConditionExpression"], texts["KeyConditionExpression"], texts["FilterExpression"], parsed_update,
        names, values, sizes,
    )  # fmt: skip


# an UpdateItem's (or a transaction's Update's) shape (``_update_shape``) that ``expressions`` checked -> its
# ConditionExpression text, its name placeholders (the request's and the builder's), its condition's value placeholders
# in walk order, its parsed UpdateExpression. As ``_CHECKED``: which placeholders are used, and whether the texts
# parse, follow from the texts and the placeholders' names alone, never from the values; a pure memo, bounded
_UPDATES: dict[tuple[Any, ...], tuple[str | None, dict[str, str], tuple[str, ...], Update | None]] = {}


def _update_shape(params: Mapping[str, Any]) -> tuple[tuple[Any, ...], list[Any]] | None:
    """The shape of an update request (its UpdateExpression, its condition's text or ``sim.condition_shapes`` shape,
    its name placeholders and what they name, its value placeholders' names) and its condition's values in walk
    order; None for a request ``expressions`` checks the whole way (a KeyConditionExpression or FilterExpression, an
    empty ExpressionAttributeValues, a condition the walk does not follow, names that are not strings)."""
    text = params.get("UpdateExpression")
    if type(text) is not str or "KeyConditionExpression" in params or "FilterExpression" in params:
        return None
    names = params.get("ExpressionAttributeNames") or {}
    given = params.get("ExpressionAttributeValues")
    if type(names) is not dict or (given is not None and (type(given) is not dict or not given)):
        return None
    condition = params.get("ConditionExpression")
    walked: tuple[Any, list[Any]] | None = (None, [])
    if isinstance(condition, ConditionBase):
        walked = shape([("ConditionExpression", condition)])
    elif type(condition) is str:
        walked = (("text", condition), [])
    elif condition is not None:
        walked = None
    if walked is None or not all(type(k) is str and type(v) is str for k, v in names.items()):
        return None
    return (text, walked[0], tuple(names.items()), tuple(given or ())), walked[1]


def _keep_update(key: tuple[Any, ...], condition: str | None, names: dict[str, str], parsed: Update | None) -> None:
    """Remember an update shape ``expressions`` checked (``_UPDATES``), when its condition's placeholders are known:
    none, or those the builder was seen to place for its shape (``_BUILT``)."""
    placeholders: tuple[str, ...] = ()
    if key[1] is not None and key[1][0] != "text":
        built = _BUILT.get(key[1])
        if built is None:
            return
        placeholders = tuple(p for field in built for p in field.placeholders)
    if len(_UPDATES) >= _BUILT_KEPT:
        _UPDATES.clear()
    _UPDATES[key] = (condition, dict(names), placeholders, parsed)


def _updated_expressions(
    params: Mapping[str, Any],
    checked: tuple[str | None, dict[str, str], tuple[str, ...], Update | None],
    condition_values: list[Any],
) -> Expressions:
    """``expressions`` of an update request of a shape checked before (``_UPDATES``): its values canonical (and
    sized), the condition's placed as the builder placed them."""
    condition, names, placeholders, parsed = checked
    values: dict[str, Any] = {}
    sizes: dict[str, tuple[Any, int]] = {}
    for k, v in (params.get("ExpressionAttributeValues") or {}).items():
        sizes[k] = sized = sized_value(v)
        values[k] = sized[0]
    values.update(zip(placeholders, map(canonical, condition_values), strict=True))
    return Expressions(condition, None, None, parsed, dict(names), values, sizes)


def _conditions_only(params: Mapping[str, Any]) -> tuple[Shape, list[Any]] | None:
    """The shape and values (``sim.condition_shapes.shape``) of a request whose expressions are all boto3 condition
    objects, with no placeholders of its own (no ``ExpressionAttributeNames`` / ``Values``: the builder makes them
    all); None for any other request."""
    if "ExpressionAttributeNames" in params or "ExpressionAttributeValues" in params:
        return None
    conditions = []
    for field in _FIELDS:
        condition = params.get(field)
        if condition is None:
            continue
        if not isinstance(condition, ConditionBase):
            return None
        conditions.append((field, condition))
    return shape(conditions)


class _Built(NamedTuple):
    """One field as boto3's builder built it: its text, its name placeholders, its value placeholders in order."""

    field: str
    text: str
    names: dict[str, str]
    placeholders: tuple[str, ...]


# a shape (sim.condition_shapes) -> per field: its text, its name placeholders, its value placeholders in walk order:
# a pure memo of boto3's builder (same shape in, same texts and names out), bounded, shared by every run
_BUILT: dict[Shape, tuple[_Built, ...]] = {}
_BUILT_KEPT = 4096
# a shape of a request of condition objects only (``_conditions_only``) that ``expressions`` built and checked: its
# ConditionExpression, KeyConditionExpression and FilterExpression texts, name placeholders and value placeholders in
# walk order. Which placeholders are used, and whether the texts parse, follow from the texts and the placeholders'
# names alone (never from the values), so a shape checked once is valid again with any values: a pure memo, bounded
# as ``_BUILT``, kept only for a shape ``_BUILT`` holds (one the builder was seen to build with its walk's values)
_CHECKED: dict[Shape, tuple[str | None, str | None, str | None, dict[str, str], tuple[str, ...]]] = {}


def _built(
    conditions: list[tuple[str, ConditionBase]], names: dict[str, str], values: dict[str, Any]
) -> dict[str, str]:
    """Build the ``(field, condition)`` as boto3's resource layer does (one ``ConditionExpressionBuilder`` for the
    request, fields in ``_FIELDS`` order): their texts by field; their name placeholders added to ``names``, their
    value placeholders to ``values`` (canonical). A pure memo by shape (``sim.condition_shapes``: same shape, same
    texts and names from the builder): a shape built before is not built again, its values fill its ``:vN`` in walk
    order; a shape is kept only when the walk found the very values the builder placed, and anything the walk does
    not know is built by boto3 every time.
    """
    walked = shape(conditions)
    known = _BUILT.get(walked[0]) if walked is not None else None
    texts: dict[str, str] = {}
    if walked is not None and known is not None:
        given = iter(walked[1])
        for field, text, field_names, placeholders in known:
            names.update(field_names)
            values.update({k: canonical(next(given)) for k in placeholders})
            texts[field] = text
        return texts
    builder = ConditionExpressionBuilder()
    built_fields = []
    built_values: list[Any] = []
    for field, condition in conditions:
        built = builder.build_expression(condition, is_key_condition=field == "KeyConditionExpression")
        names.update(built.attribute_name_placeholders)
        values.update({k: canonical(v) for k, v in built.attribute_value_placeholders.items()})
        texts[field] = built.condition_expression
        placeholders = tuple(built.attribute_value_placeholders)
        built_fields.append(_Built(field, built.condition_expression, built.attribute_name_placeholders, placeholders))
        built_values.extend(built.attribute_value_placeholders.values())
    if walked is not None and len(walked[1]) == len(built_values) and all(map(operator.is_, walked[1], built_values)):
        if len(_BUILT) >= _BUILT_KEPT:
            _BUILT.clear()
        _BUILT[walked[0]] = tuple(built_fields)
    return texts


def _check_used(field: str, defined: Any, used: set[str], what: str) -> None:
    if defined == used:  # every one defined is used and no other (a dict's keys compare with a set as a set)
        return
    missing = sorted(used - set(defined))
    if missing:
        kind = "name" if "name" in what else "value"
        raise validation(f"An expression {what} is not defined; attribute {kind}: {missing[0]}")
    unused = sorted(set(defined) - used)
    if unused:
        raise validation(f"Value provided in {field} unused in expressions: keys: {{{', '.join(unused)}}}")


__all__ = ["EvaluationError", "ExpressionError", "RequestError", "client_error", "expressions", "metadata"]
