"""An in-memory DynamoDB for the simulation: tables that stand in for boto3 ``dynamodb.Table`` resources.

``MemoryDynamo(kernel, faults).table(name)`` answers the calls ``adapters.dynamo`` makes of a boto3 Table resource
(``name``, ``get_item``, ``put_item``, ``update_item``, ``delete_item``, ``query``,
``meta.client.transact_write_items``) with the same return values (numbers as ``Decimal``, ``Item`` /
``Attributes`` / ``Items``) and the same errors (``sim.dynamo_calls``), so the product's adapters run unchanged on
it. Semantics, from the DynamoDB Developer Guide and API Reference:

- "Condition expressions": a write with a ConditionExpression applies only if it holds on the item as stored (no
  item: every attribute missing); it fails with ConditionalCheckFailedException, carrying the item with
  ``ReturnValuesOnConditionCheckFailure=ALL_OLD``. Each call is atomic (the simulation is single-threaded).
- "Update expressions" (``sim.updates``): UpdateItem creates the item when there is none; ReturnValues NONE,
  ALL_OLD, ALL_NEW, UPDATED_OLD, UPDATED_NEW.
- "TransactWriteItems": up to 100 ConditionCheck / Put / Update / Delete actions, at most one per item, all applied
  or none; a failed condition cancels it (TransactionCanceledException with one CancellationReason per action in
  order: ``Code`` "None", "ConditionalCheckFailed" (with ``Item`` for ALL_OLD) or "ValidationError").
- "Query": the partition key by equality, the sort key by =, <, <=, >, >=, BETWEEN or begins_with; items in sort
  key order (UTF-8 bytes, i.e. code points), reversed with ``ScanIndexForward=False``; a page ends after ``Limit``
  items or 1 MB read, with ``LastEvaluatedKey``; FilterExpression applies after the page is read.
- Items are at most 400 KB ("Item sizes and formats"); key attributes are non-empty strings (the state table's
  schema, ``core.schema``).

Faults: every call first asks ``faults.check("dynamodb", <operation>)`` (PutItem, GetItem, UpdateItem, DeleteItem,
Query, TransactWriteItems) and raises that error code's answer (HTTP 500/503 for InternalServerError /
ServiceUnavailable, 400 otherwise); for TransactWriteItems the codes TransactionConflict and ThrottlingError cancel
the transaction with that reason instead; ``StaleRead`` makes an eventually consistent GetItem / Query answer as
of before the last second's writes (``sim.dynamo_stale``; without it every read is strongly consistent). An error
answer is the one botocore raises once its own retries are spent (nothing here sleeps). Not modelled: TTL deletion
(an item past its ``expires_at`` stays, as DynamoDB may keep it for days: its readers must skip it themselves),
ClientRequestToken idempotency, projections, capacity.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Mapping
from typing import Any

from sim.dynamo_calls import RequestError, client_error, expressions, metadata, validation
from sim.dynamo_filters import Verdicts
from sim.dynamo_keys import key_of, sort_key_group
from sim.dynamo_query import PAGE_BYTES, Answers, query
from sim.dynamo_stale import STALE_READ, History
from sim.dynamo_transactions import MemoryClient
from sim.dynamo_write import Sizing, Write, returned
from sim.expression_syntax import ExpressionError
from sim.faults import Faults
from sim.kernel import Kernel
from sim.values import MAX_ITEM_BYTES, Item, copy_item
from sim.values_size import sized_canonical_item

Listener = Callable[[str, tuple[str, str], Item | None, Item | None], None]


class MemoryDynamo:
    """The simulation's DynamoDB: its tables and the client their ``meta.client`` is.

    Args:
        kernel: the simulation's kernel (a stream for injected transaction conflicts).
        faults: consulted at the start of every call.
        copy_reads: GetItem and Query answer copies of the stored items, as boto3 answers fresh objects. False
            answers the stored objects themselves (about twice as fast for a large Query): only for callers that
            never change what they read, as ``adapters.dynamo`` (it makes plain copies with ``plain``). Writes
            never change a stored item in place either way.

    Attributes:
        calls: operation name -> calls made (including failed ones).
        listeners: called after every applied write with (table name, (pk, sk), old item, new item); None for no
            item. The items are the stored objects: a listener reads them and never changes them. The invariant
            checker may watch writes this way.
        before_call: called with the operation name at the start of every call, before it reads or writes anything
            (not while one of them runs: calls they make do not call them again). A preemption point without
            threads: the simulation may run another actor's step here (a competing Lambda invocation), so a product
            step that reads, then writes without a condition, loses the race it would lose on AWS.
    """

    def __init__(self, kernel: Kernel, faults: Faults, copy_reads: bool = True) -> None:
        self.kernel = kernel
        self.copy_reads = copy_reads
        self.faults = faults
        self.tables: dict[str, MemoryTable] = {}
        self.client = MemoryClient(self)
        self.meta = _Meta(self.client)  # resource.meta.client, as on a boto3 service resource
        self.calls: dict[str, int] = {}
        self.listeners: list[Listener] = []
        self.before_call: list[Callable[[str], None]] = []
        self._preempting = False
        self._requests = 0
        self.pending: str | None = None  # the injected code the current call acts on (``begin``)
        self._rng = kernel.stream("dynamodb:conflicts")

    def create_table(self, name: str, partition_key: str = "pk", sort_key: str = "sk") -> MemoryTable:
        """A new empty table keyed by two string attributes (``core.schema.state_table``'s layout)."""
        table = self.tables[name] = MemoryTable(self, name, (partition_key, sort_key))
        return table

    def table(self, name: str) -> MemoryTable:
        """The table ``name`` (created with the state table's keys on first use)."""
        table = self.tables.get(name)  # not ``or``: an empty table is falsy (``__len__``)
        return table if table is not None else self.create_table(name)

    def Table(self, name: str) -> MemoryTable:  # the boto3 resource's method name
        """``table``, as a boto3 ``dynamodb`` service resource names it (the handlers' ``dynamodb.Table(name)``)."""
        return self.table(name)

    def snapshot(self) -> dict[str, dict[tuple[str, str], Item]]:
        """table name -> {(pk, sk): item} (copies)."""
        return {name: table.snapshot() for name, table in self.tables.items()}

    # calls --------------------------------------------------------------------------------------------------------
    def begin(self, operation: str) -> str:
        """Count the call, raise the injected fault if any; returns the call's request id. The codes that are not
        errors (``StaleRead``; TransactionConflict / ThrottlingError for TransactWriteItems) are left in
        ``pending`` for the call to act on."""
        if self.before_call and not self._preempting:
            self._preempting = True
            try:
                for hook in list(self.before_call):
                    hook(operation)
            finally:
                self._preempting = False
        self._requests += 1
        self.calls[operation] = self.calls.get(operation, 0) + 1
        request_id = f"SIM{self._requests:012d}"
        code = self.faults.check("dynamodb", operation)
        cancels = operation == "TransactWriteItems" and code in ("TransactionConflict", "ThrottlingError")
        if code is not None and code != STALE_READ and not cancels:
            raise client_error(code, operation, request_id)
        self.pending = code
        return request_id

    def injected_cancellation(self) -> str | None:
        """The cancellation code ``begin`` drew for the current TransactWriteItems, if any."""
        return self.pending if self.pending != STALE_READ else None

    def stale(self, consistent: bool) -> bool:
        """Whether the current read answers from before recent writes (``sim.dynamo_stale``)."""
        return self.pending == STALE_READ and not consistent

    def pick(self, n: int) -> int:
        """Which of ``n`` transaction actions an injected conflict lands on."""
        return self._rng.randrange(n)

    def applied(self, table: str, key: tuple[str, str], old: Item | None, new: Item | None) -> None:
        for listener in self.listeners:
            listener(table, key, old, new)


class _Meta:
    def __init__(self, client: MemoryClient) -> None:
        self.client = client


class MemoryTable:
    """One table: items by partition, sort keys kept in order. See the module docstring for the semantics.

    Args:
        dynamo: the owning ``MemoryDynamo``.
        name: the table name.
        keys: (partition key attribute, sort key attribute).
    """

    def __init__(self, dynamo: MemoryDynamo, name: str, keys: tuple[str, str]) -> None:
        self.dynamo = dynamo
        self.name = name
        self.table_name = name
        self.keys = keys
        self.meta = _Meta(dynamo.client)
        self._items: dict[str, dict[str, Item]] = {}
        self._order: dict[str, list[str]] = {}
        self._in_order: dict[str, list[Item]] = {}  # each partition's items in the order of ``_order``
        # item_bytes of each stored item by partition and sort key, for Query's 1 MB pages
        self._sizes: dict[str, dict[str, int]] = {}
        self._bytes: dict[str, dict[str, int]] = {}  # the sum of a partition's _sizes by sort key group (a bound)
        # (pk, sk) -> value_bytes of its item's list, map and set attributes by name, to size updates (``sizing``)
        self._parts: dict[tuple[str, str], dict[str, int]] = {}
        self.answer: Callable[[Item], Item] = copy_item if dynamo.copy_reads else _shared  # what a read hands out
        self.shared_reads = not dynamo.copy_reads
        self.history = History()  # for eventually consistent reads under a StaleRead fault
        self.verdicts = Verdicts()  # a Query's FilterExpression judged once per stored item (``sim.dynamo_filters``)
        self.answers = Answers()  # Query answers kept while what they read is unchanged (``sim.dynamo_query``)

    # for the invariant checker (no faults, no counting) ------------------------------------------------------------
    def items(self, pk: str | None = None) -> list[Item]:
        """The partition ``pk``'s items in sort key order (copies); every item (partitions in order) without one."""
        pks = sorted(self._order) if pk is None else [pk]
        return [copy_item(self._items[p][sk]) for p in pks for sk in self._order.get(p, [])]

    def peek(self, pk: str, sk: str) -> Item | None:
        """One item (a copy), or None."""
        item = self._items.get(pk, {}).get(sk)
        return None if item is None else copy_item(item)

    def snapshot(self) -> dict[tuple[str, str], Item]:
        """{(pk, sk): item} for every item (copies), partitions and sort keys in order."""
        return {(pk, sk): copy_item(self._items[pk][sk]) for pk in sorted(self._order) for sk in self._order[pk]}

    def __len__(self) -> int:
        return sum(len(p) for p in self._items.values())

    # storage ------------------------------------------------------------------------------------------------------
    def stored(self, key: tuple[str, str]) -> Item | None:
        return self._items.get(key[0], {}).get(key[1])

    def sizing(self, key: tuple[str, str]) -> Sizing:
        """The stored item's ``item_bytes`` and its lists', maps' and sets' ``value_bytes`` by name (read only)."""
        return self._sizes.get(key[0], {}).get(key[1], 0), self._parts.get(key, {})

    def store(self, key: tuple[str, str], item: Item | None, size: int, parts: dict[str, int] | None = None) -> None:
        """Put ``item`` (of ``size`` bytes, its ``parts`` as ``sizing`` answers them) at ``key``, or delete what is
        there (None); tell the listeners."""
        pk, sk = key
        old = self.stored(key)
        self.answers.wrote(pk, sk)
        if parts:
            self._parts[key] = parts
        else:
            self._parts.pop(key, None)
        if item is None:
            if old is not None:
                self._bytes[pk][sort_key_group(sk)] -= self._sizes[pk][sk]
                del self._items[pk][sk], self._sizes[pk][sk]
                order, at = self._order[pk], bisect_left(self._order[pk], sk)
                del order[at], self._in_order[pk][at]
                if not order:
                    del self._items[pk], self._order[pk], self._sizes[pk], self._bytes[pk], self._in_order[pk]
                self.verdicts.forget(key)
        else:
            order, in_order = self._order.setdefault(pk, []), self._in_order.setdefault(pk, [])
            at = bisect_left(order, sk)
            if old is None:
                order.insert(at, sk)
                in_order.insert(at, item)
            else:
                in_order[at] = item
            sizes = self._sizes.setdefault(pk, {})
            groups, group = self._bytes.setdefault(pk, {}), sort_key_group(sk)
            groups[group] = groups.get(group, 0) - sizes.get(sk, 0) + size
            self._items.setdefault(pk, {})[sk] = item
            sizes[sk] = size
        self.history.record(key, self.dynamo.kernel.t, old)
        self.dynamo.applied(self.name, key, old, item)

    def key_of(self, key: Mapping[str, Any], exact: bool = True) -> tuple[str, str]:
        """(pk, sk) of a ``Key`` (exactly the two key attributes) or an item (``exact=False``): ``dynamo_keys.key_of``.

        Raises:
            RequestError: ValidationException, as DynamoDB words it.
        """
        return key_of(self.keys, key, exact)

    def write(self, kind: str, params: Mapping[str, Any]) -> Write:
        """The ``Write`` a Put / Update / Delete / ConditionCheck request asks for.

        Raises:
            RequestError: ValidationException.
        """
        exprs = expressions(params, update=kind == "Update")
        if kind == "ConditionCheck" and exprs.condition is None:
            raise validation("1 validation error detected: ConditionExpression must not be null")
        item = None
        parts: dict[str, int] = {}
        if kind == "Put":
            item, size = sized_canonical_item(dict(params["Item"]), parts)
            key = self.key_of(item, exact=False)
            if size > MAX_ITEM_BYTES:
                raise validation("Item size has exceeded the maximum allowed size")
        else:
            key, size = self.key_of(params["Key"]), 0
        on_failure = params.get("ReturnValuesOnConditionCheckFailure", "NONE") == "ALL_OLD"
        return Write(kind, key, exprs, self.keys, item, on_failure, (size, parts))

    # the Table resource's calls --------------------------------------------------------------------------------------
    def get_item(
        self,
        *,
        Key: Mapping[str, Any],  # boto3's parameter names
        ConsistentRead: bool = False,
    ) -> dict[str, Any]:
        request_id = self.dynamo.begin("GetItem")
        try:
            key = self.key_of(Key)
        except RequestError as err:
            raise client_error(err.code, "GetItem", request_id, err.message) from None
        item = self.stored(key)
        if self.dynamo.stale(ConsistentRead):
            item = self.history.version(key, item, self.dynamo.kernel.t)
        out: dict[str, Any] = {"ResponseMetadata": metadata(request_id)}
        if item is not None:
            out["Item"] = self.answer(item)
        return out

    def put_item(self, **params: Any) -> dict[str, Any]:
        return self._single("PutItem", "Put", params)

    def update_item(self, **params: Any) -> dict[str, Any]:
        return self._single("UpdateItem", "Update", params)

    def delete_item(self, **params: Any) -> dict[str, Any]:
        return self._single("DeleteItem", "Delete", params)

    def _single(self, operation: str, kind: str, params: Mapping[str, Any]) -> dict[str, Any]:
        request_id = self.dynamo.begin(operation)
        try:
            write = self.write(kind, params)
            old = self.stored(write.key)
            if not write.holds(old):
                extra = {"Item": item} if (item := write.failure_item(old)) else {}
                raise client_error("ConditionalCheckFailedException", operation, request_id, extra=extra)
            new = write.result(old)
            sized = write.sized(new, old, self.sizing(write.key))
        except (RequestError, ExpressionError) as err:
            code, message = (
                (err.code, err.message) if isinstance(err, RequestError) else ("ValidationException", str(err))
            )
            raise client_error(code, operation, request_id, message) from None
        self.store(write.key, new, *sized)
        out: dict[str, Any] = {"ResponseMetadata": metadata(request_id)}
        attributes = returned(params.get("ReturnValues", "NONE"), old, new, write)
        if attributes:
            out["Attributes"] = attributes
        return out

    def query(self, **params: Any) -> dict[str, Any]:
        return query(self, params)

    def _whole(self, pk: str, keys: list[str]) -> list[Item] | None:
        """The items of ``keys`` (read as they are now) when together they are under a page (``PAGE_BYTES``), so that
        a Query with no limit reads them all at once (its filter, if any, judged after); None when they are not.
        ``keys`` in order (either way) all have a group between their ends' (``key_range``, ``sort_key_group``):
        the bytes of those groups bound theirs, unsummed (a membership read's ``MEMBERSHIP`` to ``NODE$``: the mark
        and the ``NODE#`` items, whatever the partition's ``CMD#`` items weigh)."""
        groups = self._bytes.get(pk, {})
        low, high = sorted((sort_key_group(keys[0]), sort_key_group(keys[-1]))) if keys else ("", "")  # either way
        if low == high:
            bound = groups.get(low, 0) if keys else sum(groups.values())
        else:
            bound = sum(size for group, size in groups.items() if low <= group <= high)
        if bound >= PAGE_BYTES:  # the keys' items are under a page when their bound is
            sizes = self._sizes.get(pk, {})
            if sum(map(sizes.__getitem__, keys)) >= PAGE_BYTES:
                return None
        order = self._order.get(pk, [])
        at = bisect_left(order, keys[0]) if keys and keys[0] <= keys[-1] else -1
        if at >= 0 and at + len(keys) <= len(order) and order[at + len(keys) - 1] == keys[-1]:
            return self._in_order[pk][at : at + len(keys)]  # ascending keys of the order, first to last: a slice of it
        return list(map(self._items.get(pk, {}).__getitem__, keys))

    def partition(self, pk: str) -> dict[str, Item]:
        """The partition's items by sort key (the dict itself: read only)."""
        return self._items.get(pk, {})

    def sizes(self, pk: str) -> dict[str, int]:
        """The ``item_bytes`` of the partition's items by sort key (the dict itself: read only)."""
        return self._sizes.get(pk, {})

    def sort_keys(self, pk: str) -> list[str]:
        """The partition's sort keys in order (the list itself: read only)."""
        return self._order.get(pk, [])


def _shared(item: Item) -> Item:
    return item
