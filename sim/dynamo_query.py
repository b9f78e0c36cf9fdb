"""Query for the in-memory DynamoDB (``sim.dynamo.MemoryTable.query``), and its answers kept by request (``Answers``)
for as long as the part of the table they read is unchanged.

Semantics as in ``sim.dynamo``'s module docstring ("Query"). A Query's answer (its items, ``Count``, ``ScannedCount``
and ``LastEvaluatedKey``) is a function of the request and of the items stored under the keys its key condition
admits: the table's other items are not read, and a FilterExpression applies to what was read. Most of the product's
Queries ask the same again and again of a part of the table nobody wrote since (a 12-node week: about 98 % of 23,700
Queries), and each resolved its expressions, its key range and its filter again. So the table counts its writes by
partition and by sort key group (``Answers.wrote``, told by ``MemoryTable.store``: the one place that changes what is
stored), and keeps the answer of each request, with the count of writes of what it read when it was answered: the
partition, or the sort key group every key its key condition admits lies in, whatever keys the partition holds
(``sim.dynamo_keys.key_range``). The same request while that count is unchanged answers the same items, counts and
last key, in a new answer (a new list; copies of the items under ``copy_reads``), as DynamoDB answers a table that did
not change. Each call is still counted, asked for its fault and given its own request id (``MemoryDynamo.begin``);
an eventually consistent read under a ``StaleRead`` fault, and every request outside the form below, takes the full
path; an error answer is never kept.

A request is known again by what boto3 sends for it, never by its objects' identity (a caller may build the same
condition anew, or change a list an ``IN`` holds): its KeyConditionExpression and FilterExpression as boto3 condition
objects of boto3's own classes, walked as boto3's builder walks them (``_walk``: each node's class and parts, the
attributes' names, the values, each a ``str``: the same values of the same type, so the same canonical values);
``ConsistentRead``, ``Limit`` and ``ScanIndexForward`` as ``bool`` or ``int`` (with their type);
``ExclusiveStartKey`` as a map of strings; no other parameter (placeholders given as ``ExpressionAttributeNames`` /
``Values``, strings for expressions: the full path every time). One flat tuple of these is the request's key:
cheaper to make and to hash than ``sim.condition_shapes``' shape with its values, the memo of the builder the full
path uses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from boto3.dynamodb.conditions import Attr, ConditionBase, Key

from sim.condition_shapes import _KNOWN
from sim.dynamo_calls import Expressions, RequestError, client_error, expressions, metadata, validation
from sim.dynamo_keys import key_range, sort_key_group
from sim.expression_syntax import ExpressionError
from sim.values import Item, item_bytes

if TYPE_CHECKING:
    from sim.dynamo import MemoryTable

PAGE_BYTES = 1024 * 1024  # "Query": a page reads at most 1 MB
ANSWERS_KEPT = 1024  # the requests whose answers a table keeps (cleared past it)

_CONDITIONS = ("KeyConditionExpression", "FilterExpression")  # in boto3's build order (``dynamo_calls._FIELDS``)
_SCALARS = frozenset({"ConsistentRead", "Limit", "ScanIndexForward"})
_SCALAR_TYPES = frozenset({bool, int})
_TEXT = frozenset({str})

# what a kept answer read: (partition, its sort key group or None for the whole partition)
Scope = tuple[str, str | None]
# a kept answer: what it read, that part's count of writes then, the stored items answered, ScannedCount, the
# partition key and the last sort key read (LastEvaluatedKey), or None
Kept = tuple[Scope, int, list[Item], int, str, str | None]


class Answers:
    """One table's Query answers by request, each with the count of writes of what it read (module docstring)."""

    __slots__ = ("_kept", "_writes", "_written")

    def __init__(self) -> None:
        self._kept: dict[tuple[Any, ...], Kept] = {}
        self._written: dict[Scope, int] = {}  # the table's count of writes when it last wrote in each scope
        self._writes = 0

    def wrote(self, pk: str, sk: str) -> None:
        """A write at (``pk``, ``sk``): every answer that read its partition or its sort key group is stale."""
        self._writes += 1
        self._written[pk, None] = self._written[pk, sort_key_group(sk)] = self._writes

    def get(self, request: tuple[Any, ...]) -> Kept | None:
        """The answer kept for ``request`` if nothing it read was written since."""
        kept = self._kept.get(request)
        return kept if kept is not None and self._written.get(kept[0], 0) == kept[1] else None

    def keep(self, request: tuple[Any, ...], scope: Scope, page: list[Item], scanned: int, last: str | None) -> None:
        if len(self._kept) >= ANSWERS_KEPT:
            self._kept.clear()
        self._kept[request] = (scope, self._written.get(scope, 0), page, scanned, scope[0], last)


def request_of(params: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """What tells a Query request from another (module docstring), or None for one whose answer is not kept: a flat
    tuple of each parameter's name and what it holds, a condition as ``_walk`` gives it."""
    key: list[Any] = []
    append = key.append
    try:
        for name, value in params.items():
            if name in _CONDITIONS:
                if type(value) not in _KNOWN:
                    return None
                append(name)
                _walk(value, name == "KeyConditionExpression", append)
            elif name in _SCALARS:
                if type(value) not in _SCALAR_TYPES:
                    return None
                append(name)
                append(type(value))
                append(value)
            elif name == "ExclusiveStartKey":
                if type(value) is not dict or not _TEXT.issuperset(map(type, value)):
                    return None
                if not _TEXT.issuperset(map(type, value.values())):
                    return None
                append(name)
                append(len(value))
                key.extend(value.items())
            else:
                return None
    except _Unknown:
        return None
    return tuple(key)


class _Unknown(Exception):
    """A part of a condition ``_walk`` does not take for a key: the request's answer is not kept."""


def _walk(condition: ConditionBase, is_key: bool, append: Callable[[Any], None]) -> None:
    """Append a condition of one of boto3's own classes (``sim.condition_shapes``) to a request's key, depth first as
    boto3's builder visits it: its class and its number of parts, then each part: a condition the same way, an
    attribute (``Key`` or ``Attr``, only ``Key`` in a key condition) as its class and its ``str`` name, a value (a
    ``str``) as itself, an ``IN``'s list or tuple of ``str`` as its length and its values. Whatever boto3 builds of
    it follows from these: its format, operator and grouping are its class's, an instance of its own holding nothing
    but its parts (``_values``), and each token tells what it is and how many follow, so two requests with the same
    key are the same request. Anything else raises ``_Unknown`` (a ``Size`` too: it holds its attribute's name)."""
    state = condition.__dict__
    parts = state.get("_values")  # what its get_expression() gives the builder
    if len(state) != 1 or type(parts) is not tuple:  # an instance with a format, an operator or a method of its own
        raise _Unknown
    append(type(condition))
    append(len(parts))
    grouped = condition.has_grouped_values
    for part in parts:
        kind = type(part)
        if kind is str and not grouped:
            append(part)
        elif kind in _KNOWN:
            _walk(part, is_key, append)
        elif kind is Key or (kind is Attr and not is_key):
            if type(part.name) is not str:
                raise _Unknown
            append(kind)
            append(part.name)
        elif grouped and (kind is list or kind is tuple) and _TEXT.issuperset(map(type, part)):
            append(len(part))
            for value in part:
                append(value)
        else:
            raise _Unknown


def query(table: MemoryTable, params: Mapping[str, Any]) -> dict[str, Any]:
    """A Query of ``table`` (``MemoryTable.query``): its answer as boto3's resource layer gives it."""
    dynamo = table.dynamo
    request_id = dynamo.begin("Query")
    stale = dynamo.stale(bool(params.get("ConsistentRead", False)))
    request = None if stale else request_of(params)
    kept = None if request is None else table.answers.get(request)
    if kept is not None:
        _, _, page, scanned, pk, last = kept
    else:
        try:
            page, scanned, pk, last, group = _read(table, params, stale)
        except (RequestError, ExpressionError) as err:
            code, message = (
                (err.code, err.message) if isinstance(err, RequestError) else ("ValidationException", str(err))
            )
            raise client_error(code, "Query", request_id, message) from None
        if request is not None:
            table.answers.keep(request, (pk, group), page, scanned, last)
    items = list(page) if table.shared_reads else list(map(table.answer, page))
    out: dict[str, Any] = {"Items": items, "Count": len(items), "ScannedCount": scanned}
    if last is not None:
        out["LastEvaluatedKey"] = {table.keys[0]: pk, table.keys[1]: last}
    out["ResponseMetadata"] = metadata(request_id)
    return out


def _read(
    table: MemoryTable, params: Mapping[str, Any], stale: bool
) -> tuple[list[Item], int, str, str | None, str | None]:
    """What a Query reads: (the stored items it answers, in order; ScannedCount; the partition key; the last sort key
    read when the page ends before the keys do, else None; the sort key group every key it may read lies in, or None).

    Raises:
        RequestError, ExpressionError: the request is refused.
    """
    exprs = expressions(params)
    if exprs.key_condition is None:
        raise validation("Either the KeyConditions or KeyConditionExpression parameter must be specified")
    pk, candidates, group = key_range(table, exprs, params)
    limit = int(params.get("Limit") or 0)
    page: list[Item] = []
    scanned, read = 0, 0
    last: str | None = None
    keep = exprs.filter
    whole = None if stale or limit else table._whole(pk, candidates)
    judged = None if keep is None else table.verdicts.judge(exprs.holds, keep, exprs.names, exprs.values, pk)
    if whole is not None:  # one page, every item: what the loop below answers, without a step an item
        scanned = len(whole)
        # in the keys' order, as the loop (an item the filter cannot judge raises)
        return (whole if judged is None else judged.kept(candidates, whole)), scanned, pk, None, group
    for sk, item, size in _selected(table, pk, candidates, exprs, params, stale):
        scanned += 1
        read += size
        if judged is None or judged(sk, item):
            page.append(item)
        if (limit and scanned >= limit) or read >= PAGE_BYTES:
            last = sk
            break
    return page, scanned, pk, last, group


def _selected(
    table: MemoryTable, pk: str, keys: list[str], exprs: Expressions, params: Mapping[str, Any], stale: bool
) -> Iterator[tuple[str, Item, int]]:
    """(sort key, item, size) of what a Query reads: exactly ``keys`` (key_range's bounds), or with a ``stale``
    read the versions ``History`` gives."""
    partition = table.partition(pk)
    if not stale:
        sizes = table.sizes(pk)
        for sk in keys:
            yield sk, partition[sk], sizes[sk]
        return
    start = (params.get("ExclusiveStartKey") or {}).get(table.keys[1])
    forward = bool(params.get("ScanIndexForward", True))
    for sk, item in table.history.query(pk, keys, partition, table.dynamo.kernel.t, exprs, forward, start):
        yield sk, item, item_bytes(item)
