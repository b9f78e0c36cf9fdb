"""moto's DynamoDB made to cost what DynamoDB's does per request, not per table, once its requests are serialised
(``localworld.aws.serialise_dynamodb``); answers are unchanged.

moto 5.2 does two things that grow with the whole table, where DynamoDB's work grows only with the
items the request reads or writes ("Query", "TransactWriteItems", DynamoDB API Reference; a Query reads the items of
its key range, 1 MB a page):

- **TransactWriteItems** takes a backup of every table a transaction names before applying it
  (``copy.deepcopy`` of the table, every item and its every value), to put back if an action fails. On the local
  world's table, which keeps every command of a refresh, a two-action transaction (a ``RUN#`` save fenced by the
  ``LOCK``) took 3 ms on an empty table and 98 ms at 2,000 items (BENCHMARKS.md, "The growth was moto's"). Here the
  backup is of the items the transaction's actions name (at most 100), taken before it runs, and those alone are put
  back when it fails: the same state after a cancelled transaction, since an action writes only the item it names.
- **Query** lists and sorts every item of the table (``Table.all_items``) to keep those of one partition, then
  compares every one's sort key with the key condition. Here a Query of a table's own key (no index) lists the items
  of its partition only, in the same order, and of a string sort key under ``BETWEEN``, ``begins_with`` or ``=``
  only the slice of them the condition can hold for (moto still judges each).

And one that grows with the answer, far beyond what a client's own parsing of it costs: moto's model-driven response
serializer walks every member of the ``AttributeValue`` shape for every value of every item (about 0.5 ms an item:
35 ms for a Query of 60 ``NODE#`` items). A value made only of the types it writes as they are (``S``, ``N``,
``BOOL``, ``NULL``, and ``L``, ``M``, ``SS``, ``NS`` of them) is written as it is, the same JSON; any other
(a binary value) goes through the serializer.

All three are patched onto moto's classes in this process (``install``; ``uninstall`` puts moto's own back), and
``tests/unit/localworld/test_dynamo_costs.py`` compares the answers with moto's own.
The transaction's backup relies on nothing else writing the table between the backup and the put-back: ``install``
takes the test of that (``localworld.aws.serialise_dynamodb`` installs this module with its lock's test), and a
transaction run while it fails (``localworld.lockrace.unserialised_dynamodb``) is left to moto's own backup, as are a
table with a stream and an action whose key cannot be read before the call (moto then answers its own error).
"""

from __future__ import annotations

import copy
import functools
import threading
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from typing import Any

import moto.dynamodb.models as dynamodb_models
from moto.core.serialize import JSONSerializer
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import Table

_lock = threading.Lock()
_originals: dict[tuple[Any, str], Any] = {}
_serialised: list[Callable[[], bool]] = []  # ``install``'s test: requests are served one at a time now
# ``shallow``: a transaction's tables are not copied; ``partition``: a Query's hash key, key comparison and its bounds
_state = threading.local()

Touched = tuple[Table, DynamoType, DynamoType | None, Item | None]  # a table, an item's key, the item before


class _Copy:
    """moto's ``copy`` module as its DynamoDB backend sees it: a table is not copied while this thread runs a
    transaction whose named items are backed up instead (``_transact``); everything else as ``copy`` does."""

    def __init__(self) -> None:
        self.copy = copy.copy

    @staticmethod
    def deepcopy(value: Any, memo: dict[int, Any] | None = None) -> Any:
        if isinstance(value, Table) and getattr(_state, "shallow", False):
            return value  # its rollback puts this same table back: a no-op; ``_transact`` restores the items
        return copy.deepcopy(value, memo)


def _touched(backend: DynamoDBBackend, actions: list[dict[str, Any]]) -> list[Touched] | None:
    """Each item the transaction's actions name, once, with a copy of it as it is now (None: no such item); None
    when a key cannot be read before the call or a table has a stream (moto's own backup then)."""
    out: list[Touched] = []
    seen: set[tuple[str, DynamoType, DynamoType | None]] = set()
    for action in actions:
        if not isinstance(action, dict) or len(action) != 1:
            return None
        ((kind, params),) = action.items()
        table = backend.tables.get(str(params.get("TableName"))) if isinstance(params, dict) else None
        if table is None:
            continue  # moto answers ResourceNotFound for it; nothing of it to put back
        if table.stream_shard is not None:
            return None
        attrs = params.get("Item") if kind == "Put" else params.get("Key")
        try:
            hash_key = DynamoType(attrs[table.hash_key_attr])
            range_key = DynamoType(attrs[table.range_key_attr]) if table.range_key_attr else None
            before = table.get_item(hash_key, range_key)
        except Exception:  # noqa: BLE001  # a malformed key: moto's own call refuses it, with moto's own backup
            return None
        key = (table.name, hash_key, range_key)
        if key not in seen:
            seen.add(key)
            out.append((table, hash_key, range_key, copy.deepcopy(before)))
    return out


def _put_back(touched: list[Touched]) -> None:
    for table, hash_key, range_key, before in touched:
        if range_key is None:
            if before is None:
                table.items.pop(hash_key, None)
            else:
                table.items[hash_key] = before  # type: ignore[assignment]  # a table without a range key: the item
        elif before is None:
            table.items[hash_key].pop(range_key, None)
        else:
            table.items[hash_key][range_key] = before


def _transact(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> Any:
        alone = bool(_serialised) and _serialised[0]()
        touched = _touched(self, transact_items) if alone and len(transact_items) <= 100 else None
        if touched is None:
            return original(self, transact_items)
        _state.shallow = True
        try:
            return original(self, transact_items)
        except BaseException:
            _put_back(touched)  # moto put back the tables it did not copy: the same objects, as they are now
            raise
        finally:
            _state.shallow = False

    return transact_write_items


def _query(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def query(self: Table, hash_key: DynamoType | None, *args: Any, **kwargs: Any) -> Any:
        index_name = kwargs["index_name"] if "index_name" in kwargs else (args[6] if len(args) > 6 else None)
        if index_name is not None or hash_key is None:
            return original(self, hash_key, *args, **kwargs)
        range_comparison, range_objs = (args[0], args[1]) if len(args) > 1 else (None, [])
        _state.partition = (hash_key, range_comparison, range_objs)
        try:
            return original(self, hash_key, *args, **kwargs)
        finally:
            _state.partition = None

    return query


def _all_items(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def all_items(self: Table) -> list[Item]:
        partition = getattr(_state, "partition", None)
        if partition is None or not self.range_key_attr:
            every: list[Item] = original(self)
            return every
        hash_key, comparison, bounds = partition
        items = list(self.items.get(hash_key, {}).values())
        if self.range_key_type != "S":  # in the order moto's own list gives them (by hash key, then range key)
            return sorted(items, key=lambda item: item.range_key)
        items.sort(key=lambda item: item.range_key.value)  # a string's cast value is itself
        return _within(items, comparison, [b.value for b in bounds if b.type == "S"])

    return all_items


def _as_is(value: Any) -> bool:
    """Whether ``value`` is a DynamoDB JSON attribute value that moto's serializer would write unchanged."""
    if type(value) is not dict or len(value) != 1:
        return False
    ((kind, inner),) = value.items()
    if kind in ("S", "N"):
        return type(inner) is str
    if kind in ("BOOL", "NULL"):
        return type(inner) is bool
    if kind in ("SS", "NS"):
        return type(inner) is list and all(type(v) is str for v in inner)
    if kind == "L":
        return type(inner) is list and all(map(_as_is, inner))
    if kind == "M":
        return type(inner) is dict and all(type(k) is str for k in inner) and all(map(_as_is, inner.values()))
    return False


def _serialize_structure(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def _serialize_type_structure(self: JSONSerializer, serialized: Any, value: Any, shape: Any, key: str) -> None:
        if shape.name == "AttributeValue" and key and _as_is(value):
            serialized[key] = value
            return
        original(self, serialized, value, shape, key)

    return _serialize_type_structure


def _within(items: list[Item], comparison: str | None, bounds: list[str]) -> list[Item]:
    """Of ``items`` (sorted by their string range keys), those the key condition may hold for: a slice containing
    every one it holds for (moto's Query then judges each as before), found by bisection."""
    keys = [item.range_key.value for item in items]  # type: ignore[union-attr]
    comparison = (comparison or "").upper()  # as the expression wrote it: ``BETWEEN``, ``begins_with``, ``=``
    if comparison == "BETWEEN" and len(bounds) == 2:
        return items[bisect_left(keys, bounds[0]) : bisect_right(keys, bounds[1])]
    if comparison == "BEGINS_WITH" and len(bounds) == 1:
        start = bisect_left(keys, bounds[0])
        end = start
        while end < len(keys) and keys[end].startswith(bounds[0]):
            end += 1
        return items[start:end]
    if comparison in ("=", "EQ") and len(bounds) == 1:
        return items[bisect_left(keys, bounds[0]) : bisect_right(keys, bounds[0])]
    return items


def install(serialised: Callable[[], bool]) -> None:
    """Patch moto's DynamoDB backend as the module docstring says (idempotent, process-wide). ``serialised``: whether
    this process serves DynamoDB requests one at a time now (asked at each transaction)."""
    with _lock:
        _serialised[:] = [serialised]
        if _originals:
            return
        for owner, name, wrap in (
            (DynamoDBBackend, "transact_write_items", _transact),
            (Table, "query", _query),
            (Table, "all_items", _all_items),
            (JSONSerializer, "_serialize_type_structure", _serialize_structure),
        ):
            original = getattr(owner, name)
            _originals[(owner, name)] = original
            setattr(owner, name, wrap(original))
        # the backend module's own name for ``copy`` (``setattr``: moto does not export it)
        _originals[(dynamodb_models, "copy")] = getattr(dynamodb_models, "copy")  # noqa: B009
        setattr(dynamodb_models, "copy", _Copy())  # noqa: B010


def uninstall() -> None:
    """Put moto's own methods back (idempotent)."""
    with _lock:
        for (owner, name), original in _originals.items():
            setattr(owner, name, original)
        _originals.clear()
