"""The deployment's DynamoDB table: two partitions per cluster, items keyed by kind.

Keys (see DESIGN.md, "Table items"): ``sk`` one of ``LOCK``, ``COMP#<asg>``, ``RUN#<run-id>``,
``DETACH#<instance-id>``, ``POLL#<run-id>`` in the cluster partition ``pk = CLUSTER#<cluster>``, which only the
Lambdas write; and ``NODE#<instance-id>``, ``MEMBERSHIP``, ``CMD#<command-id>``, ``HOOK#<instance-id>``,
``CPDRAIN#<n>`` (the kinds the agent writes) and the pointers beside ``CMD#`` (``ICMD#``, ``OCMD#``) in the agent
partition ``pk = CLUSTER#<cluster>#AGENT``, the only one the agent's role may touch (``dynamodb:LeadingKeys``). Every
call below picks the partition from the sort key (``core.schema.partition_for``), so callers name items by ``sk``
alone. Items that may go stale carry ``expires_at`` (epoch seconds, the table's TTL attribute), but readers never
rely on TTL deletion: they compare timestamps themselves. A Query returns an item only from its own kind's
partition: a ``LOCK``, ``COMP#`` or ``RUN#`` item someone wrote into the agent partition is never read.

This module is the low-level access (get, put, update, delete, query, with optional conditions); one module per
item kind builds on it (``commands``, ``nodes``, ``detach``, ``hooks``, ``ledger``, ``runs``, ``lock``,
``controlplane``).

Fencing: a ``put`` given a ``fence`` (the caller's ``core.lock.Lease``) is one ``TransactWriteItems`` of a
``ConditionCheck`` on the ``LOCK`` item (still this holder, same fencing value) and the put itself (a ``CMD#`` put
is in the other partition: one transaction spans items of any partitions of a table): it applies only
while the lease has not changed hands, atomically (DynamoDB transactions are serializable: "Amazon DynamoDB
Transactions: How it works", isolation levels). A lost lock raises ``LockLostError`` (carrying the ``LOCK`` item) and
the put is not applied. A fenced put given ``release_at`` also gives the lease up in the same transaction (an
``Update`` of the ``LOCK`` item under the same condition, as ``LeaseLock.release`` writes it, instead of the
``ConditionCheck``): the holder's last write and its release are one call. A fenced put given ``also`` writes
those items in the same transaction after it (``AlsoPut``: a run's save and the ``CMD#`` items of the drains it
decided, one call): DynamoDB applies all of them or none.

Errors: conditional writes that lose raise typed ``ConflictError`` subclasses carrying the current item
(``ReturnValuesOnConditionCheckFailure=ALL_OLD``); throttling, 5xx and connection failures raise
``StoreUnavailableError`` (so do an answer botocore cannot parse and a Query answer without ``Items``); any other
refusal ``AwsRequestError``. Each is raised ``from`` the botocore error (the mapping: ``adapters.dynamo.errors``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any

from boto3.dynamodb.conditions import Attr, ConditionBase, ConditionExpressionBuilder, Key

from adapters.dynamo.errors import TABLE_ERRORS, translate, translate_fenced
from adapters.dynamo.values import dynamo, dynamo_item, plain, plain_item
from adapters.dynamo.writes import MAX_ALSO, AlsoPut, Taking
from core.exceptions import ConflictError, StoreUnavailableError
from core.lock import Lease
from core.schema import AGENT_ITEM_PREFIXES, agent_item, agent_partition_of, partition_of

LOCK_SK = "LOCK"

__all__ = [
    "MAX_ALSO",
    "TABLE_ERRORS",
    "AlsoPut",
    "Attr",
    "Table",
    "Taking",
    "dynamo",
    "plain",
    "translate",
    "translate_fenced",
]


def _expression(builder: ConditionExpressionBuilder, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` with its ``ConditionExpression`` object turned into the expression string, names and values."""
    condition = params.get("ConditionExpression")
    if not isinstance(condition, ConditionBase):
        return params
    built = builder.build_expression(condition)
    out = {**params, "ConditionExpression": built.condition_expression}
    if built.attribute_name_placeholders:
        out["ExpressionAttributeNames"] = {
            **params.get("ExpressionAttributeNames", {}),
            **built.attribute_name_placeholders,
        }
    if built.attribute_value_placeholders:
        out["ExpressionAttributeValues"] = {
            **params.get("ExpressionAttributeValues", {}),
            **built.attribute_value_placeholders,
        }
    return out


class Table:
    """Typed access to one cluster's items of the table (its two partitions: module docstring).

    Args:
        table: a boto3 ``dynamodb.Table`` resource (built by the entry point, so tests pass a local one).
        cluster: the cluster name.

    Attributes:
        pk: the cluster partition (``CLUSTER#<cluster>``: ``LOCK``, ``COMP#``, ``RUN#``, ``DETACH#``, ``POLL#``).
        agent_pk: the agent partition (``CLUSTER#<cluster>#AGENT``: ``core.schema.AGENT_ITEM_PREFIXES``).
    """

    def __init__(self, table: Any, cluster: str) -> None:
        self.table = table
        self.cluster = cluster
        self.pk = partition_of(cluster)
        self.agent_pk = agent_partition_of(cluster)
        # facts about the table that, once true, stay true, and when the pointers were last backfilled
        # (``adapters.dynamo.command_index``: the index mark)
        self.memo: dict[str, bool | float] = {}

    def partition(self, sk: str) -> str:
        """The partition key value of item ``sk`` (or of the items whose sort keys start with ``sk``)."""
        return self.agent_pk if agent_item(sk) else self.pk

    def key(self, sk: str) -> dict[str, str]:
        """The primary key of item ``sk``."""
        return {"pk": self.partition(sk), "sk": sk}

    def get(self, sk: str, consistent: bool = True, as_is: Collection[str] = ()) -> dict[str, Any] | None:
        """The item ``sk`` as plain values (but the attributes named in ``as_is``: ``values.plain_item``), or None."""
        try:
            out = self.table.get_item(Key=self.key(sk), ConsistentRead=consistent)
        except TABLE_ERRORS as err:
            raise translate(err, f"get {sk}") from err
        item = out.get("Item")
        return None if item is None else plain_item(item, as_is) if as_is else plain(item)

    def query_prefix(
        self, prefix: str, consistent: bool = False, convert: bool = True, as_is: Collection[str] = ()
    ) -> Iterator[dict[str, Any]]:
        """All items whose sort key starts with ``prefix`` (in the partition of ``prefix``'s kind), following
        pagination; without ``convert``, as the table answered (DynamoDB numbers as ``Decimal``: the caller runs
        ``plain`` on those it keeps, and must not change them); with ``as_is``, those attributes left as answered
        (``values.plain_item``)."""
        key = Key("pk").eq(self.partition(prefix)) & Key("sk").begins_with(prefix)
        # every sort key starting with ``prefix`` is one side's kind (``NODE#``: the agent's; ``COMP#``: no agent kind
        # starts so) unless ``prefix`` is shorter than an agent kind's prefix it begins (``""``, ``"C"``)
        one_kind = agent_item(prefix) or not any(p.startswith(prefix) for p in AGENT_ITEM_PREFIXES)
        return self._query(key, consistent, f"query {prefix}", convert=convert, as_is=as_is, one_kind=one_kind)

    def query_range(
        self,
        low: str,
        high: str,
        consistent: bool = False,
        keep: ConditionBase | None = None,
        convert: bool = True,
        as_is: Collection[str] = (),
        own_kinds: bool = False,
    ) -> Iterator[dict[str, Any]]:
        """All items of ``low``'s partition whose sort key is between ``low`` and ``high`` (both included),
        following pagination; with ``keep``, only those it matches (a FilterExpression: DynamoDB still reads, and
        bills, the others); without ``convert``, as the table answered; ``as_is`` as ``query_prefix``'s.

        ``own_kinds``: the caller keeps only items of kinds that belong to ``low``'s partition and drops every other
        sort key itself (``snapshot.with_membership``: ``MEMBERSHIP`` and ``NODE#`` of the agent partition), so no
        item is checked for its partition (``_query``'s ``one_kind``): what it keeps is what the check would keep."""
        key = Key("pk").eq(self.partition(low)) & Key("sk").between(low, high)
        return self._query(
            key, consistent, f"query {low}..{high}", keep, convert=convert, as_is=as_is, one_kind=own_kinds
        )

    def query_partition(
        self, consistent: bool = False, wanted: Callable[[str], bool] | None = None, convert: bool = True
    ) -> Iterator[dict[str, Any]]:
        """Every item of the cluster: its cluster partition (LOCK, COMP#, RUN#, DETACH#, POLL#) first, then its agent
        partition (NODE#, MEMBERSHIP, CMD#, ICMD#, OCMD#, HOOK#, CPDRAIN#), each in sort-key order, following pagination
        (DynamoDB returns up to 1 MB a call): one read of the whole state, two Queries.

        Args:
            wanted: given a sort key, whether the caller reads that item; the others are left out before they are
                turned into plain values (a week of ``CMD#`` items, with their nested results, is most of that work).
                They are still read, and billed, by DynamoDB: a FilterExpression cannot name the sort key.
            convert: False yields the items as the table answered (as ``query_prefix``): the caller runs ``plain``
                on those it keeps, and must not change them.
        """
        yield from self._query(Key("pk").eq(self.pk), consistent, "query partition", wanted=wanted, convert=convert)
        yield from self._query(
            Key("pk").eq(self.agent_pk), consistent, "query agent partition", wanted=wanted, convert=convert
        )

    def query_cluster_partition(
        self, consistent: bool = False, convert: bool = True, keep: ConditionBase | None = None
    ) -> Iterator[dict[str, Any]]:
        """Every item of the cluster partition only (``LOCK``, ``COMP#``, ``RUN#``, ``DETACH#``, ``POLL#``: the Lambdas'
        own kinds), in sort-key order, following pagination; ``keep`` and ``convert`` as ``query_range``'s."""
        return self._query(Key("pk").eq(self.pk), consistent, "query partition", keep, convert=convert)

    def _query(
        self,
        key: ConditionBase,
        consistent: bool,
        message: str,
        keep: ConditionBase | None = None,
        wanted: Callable[[str], bool] | None = None,
        convert: bool = True,
        as_is: Collection[str] = (),
        one_kind: bool = False,
    ) -> Iterator[dict[str, Any]]:
        """The items ``key`` selects (see the public readers); with ``one_kind``, the caller's key condition selects
        only kinds that belong to the partition it queries, so no item is checked for it (a Query answers only its
        partition's items, whose sort keys satisfy the condition)."""
        kwargs: dict[str, Any] = {"KeyConditionExpression": key, "ConsistentRead": consistent}
        converted: Callable[[dict[str, Any]], dict[str, Any]] = (lambda i: plain_item(i, as_is)) if as_is else plain
        if keep is not None:
            kwargs["FilterExpression"] = keep
        while True:
            try:
                out = self.table.query(**kwargs)
            except TABLE_ERRORS as err:
                raise translate(err, message) from err
            if "Items" not in out:
                # every Query answer has Items (maybe empty); botocore reads a 200 whose body is not JSON as {}, which
                # must not pass for an empty partition
                raise StoreUnavailableError(f"{message}: an answer without Items (unreadable body)")
            if one_kind and wanted is None:  # a thousand NODE# items a membership read: none to check
                yield from map(converted, out["Items"]) if convert else out["Items"]
            else:
                yield from self._checked(out["Items"], wanted, converted if convert else None)
            if "LastEvaluatedKey" not in out:
                return
            kwargs["ExclusiveStartKey"] = out["LastEvaluatedKey"]

    def _checked(
        self,
        items: list[dict[str, Any]],
        wanted: Callable[[str], bool] | None,
        converted: Callable[[dict[str, Any]], dict[str, Any]] | None,
    ) -> Iterator[dict[str, Any]]:
        """The ``items`` of a Query page in their own partition and ``wanted``, ``converted`` (None: as answered)."""
        agent_pk, pk = self.agent_pk, self.pk
        for item in items:
            sk = str(item.get("sk", ""))
            # a kind outside its own partition (the agent may write its partition only): never read
            # (``self.partition``, inline: this runs for every item of every Query, thousands of NODE# items)
            if item.get("pk") != (agent_pk if sk.startswith(AGENT_ITEM_PREFIXES) else pk):
                continue
            if wanted is None or wanted(sk):
                yield item if converted is None else converted(item)

    def put(
        self,
        sk: str,
        attrs: dict[str, Any],
        condition: ConditionBase | None = None,
        conflict: type[ConflictError] = ConflictError,
        fence: Lease | None = None,
        release_at: float | None = None,
        take: Taking | None = None,
        also: Sequence[AlsoPut] = (),
        as_is: Collection[str] = (),
    ) -> None:
        """Write the whole item ``sk`` (if ``condition`` holds, and with a ``fence`` only while that lease is the
        lock's current one: see the module docstring; with ``release_at``, epoch seconds, the fence's lease is given
        up in the same transaction; with ``take``, the lock is taken in the same transaction and the put fenced by
        the lease taken). With ``also`` (a fence or a take needed; at most ``MAX_ALSO``), those items are written in
        the same transaction, each under its own condition: all of it or nothing. The attributes named in ``as_is``
        are sent as they are, already DynamoDB values (``adapters.dynamo.values.dynamo_item``).

        Raises:
            LockLostError: (with ``fence``) the lock changed hands or was released; nothing was written.
            LockHeldError: (with ``take``) the lock changed hands since its item was read; nothing was written.
            ConflictError (``conflict``): the condition failed; ``current`` holds the item; nothing was written.
            ConflictError (an ``AlsoPut``'s ``conflict``): only that item's condition failed; nothing was written.
            ValueError: ``also`` without a fence or a take, or more than ``MAX_ALSO`` of them.
        """
        kwargs: dict[str, Any] = {"Item": dynamo_item({**attrs, **self.key(sk)}, as_is)}
        self._condition(kwargs, condition)
        if also and ((take is None and fence is None) or len(also) > MAX_ALSO):
            raise ValueError(f"put {sk}: {len(also)} more items need a fence and at most {MAX_ALSO}")
        if take is not None:
            self._fenced({"Put": kwargs}, take.lease, f"put {sk}", conflict, take=take, also=also)
            return
        if fence is not None:
            self._fenced({"Put": kwargs}, fence, f"put {sk}", conflict, release_at, also=also)
            return
        try:
            self.table.put_item(**kwargs)
        except TABLE_ERRORS as err:
            raise translate(err, f"put {sk}", conflict) from err

    def _fenced(
        self,
        write: dict[str, dict[str, Any]],
        fence: Lease,
        message: str,
        conflict: type[ConflictError],
        release_at: float | None = None,
        take: Taking | None = None,
        also: Sequence[AlsoPut] = (),
    ) -> None:
        ((kind, params),) = write.items()
        # boto3 builds the expressions of a resource call's top-level ConditionExpression only: build them here, one
        # builder for the whole transaction so placeholders never collide (the values it then serialises itself)
        builder = ConditionExpressionBuilder()
        lock: dict[str, Any] = {
            "Key": self.key(LOCK_SK),
            "ConditionExpression": Attr("holder").eq(fence.holder) & Attr("fencing").eq(fence.fencing),
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        lock_kind = "ConditionCheck"
        if release_at is not None:  # the release as ``LeaseLock.release`` writes it: no holder, the fencing kept
            lock_kind = "Update"
            lock |= {
                "UpdateExpression": (
                    "REMOVE #rel_holder, #rel_operation SET #rel_expires = :rel_zero, #rel_at = :rel_at"
                ),
                "ExpressionAttributeNames": {
                    "#rel_holder": "holder",
                    "#rel_operation": "operation",
                    "#rel_expires": "lease_expires_at",
                    "#rel_at": "released_at",
                },
                "ExpressionAttributeValues": {":rel_zero": 0, ":rel_at": dynamo(release_at)},
            }
        if take is not None:  # the lock taken, as ``LeaseLock.acquire`` writes it
            lock_kind = "Put"
            lock = {"Item": dynamo({**take.attrs, **self.key(LOCK_SK)}), "ConditionExpression": take.condition}
            lock["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        check = _expression(builder, lock)
        items = [
            {lock_kind: {"TableName": self.table.name, **check}},
            {kind: {"TableName": self.table.name, **_expression(builder, params)}},
        ]
        for extra in also:
            put: dict[str, Any] = {"Item": dynamo({**extra.attrs, **self.key(extra.sk)})}
            self._condition(put, extra.condition)
            items.append({"Put": {"TableName": self.table.name, **_expression(builder, put)}})
        try:
            self.table.meta.client.transact_write_items(TransactItems=items)
        except TABLE_ERRORS as err:
            conflicts = [extra.conflict for extra in also]
            raise translate_fenced(err, message, conflict, fence, taking=take is not None, also=conflicts) from err

    def delete(
        self, sk: str, condition: ConditionBase | None = None, conflict: type[ConflictError] = ConflictError
    ) -> None:
        """Delete the item ``sk`` (if ``condition`` holds; deleting an absent item is not an error)."""
        kwargs: dict[str, Any] = {"Key": self.key(sk)}
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
    ) -> None:
        """Set the given attributes (None removes one). Nothing comes back (``ReturnValues`` NONE): a caller that
        reads the item after the update asks ``updated``."""
        self._update(sk, values, condition, conflict, "NONE")

    def updated(
        self,
        sk: str,
        values: dict[str, Any],
        condition: ConditionBase | None = None,
        conflict: type[ConflictError] = ConflictError,
    ) -> dict[str, Any]:
        """``update``, returning the whole item after it (``ReturnValues`` ALL_NEW, plain values)."""
        return dict(plain(self._update(sk, values, condition, conflict, "ALL_NEW")))

    def _update(
        self,
        sk: str,
        values: dict[str, Any],
        condition: ConditionBase | None,
        conflict: type[ConflictError],
        returned: str,
    ) -> dict[str, Any]:
        """One UpdateItem (DynamoDB API Reference, "UpdateItem"); its ``Attributes`` as answered (``returned``: the
        ``ReturnValues`` asked; NONE answers none: empty)."""
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
            "Key": self.key(sk),
            "UpdateExpression": " ".join(expr),
            "ExpressionAttributeNames": names,
            "ReturnValues": returned,
        }
        if sets:
            kwargs["ExpressionAttributeValues"] = {f":upd{i}": dynamo(v) for i, v in enumerate(sets.values())}
        self._condition(kwargs, condition)
        try:
            out = self.table.update_item(**kwargs)
        except TABLE_ERRORS as err:
            raise translate(err, f"update {sk}", conflict) from err
        attributes: dict[str, Any] = out.get("Attributes", {})
        return attributes

    @staticmethod
    def _condition(kwargs: dict[str, Any], condition: ConditionBase | None) -> None:
        if condition is not None:
            kwargs["ConditionExpression"] = condition
            kwargs["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
