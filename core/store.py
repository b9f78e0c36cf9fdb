"""The deployment's DynamoDB table: one partition per cluster, items keyed by kind.

Keys (see DESIGN.md, "Table items"): ``pk = CLUSTER#<cluster>`` and ``sk`` one of ``LOCK``,
``NODE#<instance-id>``, ``CMD#<command-id>``, ``COMP#<asg>``, ``RUN#<run-id>``, ``DETACH#<instance-id>``.
Items that may go stale carry ``expires_at`` (epoch seconds, the table's TTL attribute), but readers never rely
on TTL deletion: they compare timestamps themselves.

Conditional writes that lose raise typed ``ConflictError`` subclasses carrying the current item
(``ReturnValuesOnConditionCheckFailure=ALL_OLD``).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from decimal import Decimal
from typing import Any

from boto3.dynamodb.conditions import Attr, Key
from botocore.exceptions import ClientError

from core.exceptions import (
    CommandExistsError,
    CommandTransitionError,
    ConflictError,
    StoreUnavailableError,
)
from core.model import Command, CommandStatus, NodeRecord, to_epoch, utcnow

_RETRYABLE_CODES = {
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "InternalServerError",
    "ServiceUnavailable",
}


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


def translate(err: ClientError, message: str, conflict: type[ConflictError] = ConflictError) -> Exception:
    """Turn a botocore ClientError into the project's exception (to be raised ``from err``)."""
    code = err.response.get("Error", {}).get("Code", "")
    if code == "ConditionalCheckFailedException":
        item = err.response.get("Item")
        current = None
        if item:
            from boto3.dynamodb.types import TypeDeserializer

            des = TypeDeserializer()
            current = plain({k: des.deserialize(v) for k, v in item.items()})
        return conflict(message, current)
    if code in _RETRYABLE_CODES:
        return StoreUnavailableError(f"{message}: {code}")
    return err


class Store:
    """Typed access to one cluster's partition of the table.

    Args:
        table: a boto3 ``dynamodb.Table`` resource (built by the entry point, so tests pass a local one).
        cluster: the cluster name.
    """

    def __init__(self, table: Any, cluster: str) -> None:
        self.table = table
        self.cluster = cluster
        self.pk = f"CLUSTER#{cluster}"

    # -- generic -------------------------------------------------------------------------------------------

    def get(self, sk: str, consistent: bool = True) -> dict[str, Any] | None:
        try:
            out = self.table.get_item(Key={"pk": self.pk, "sk": sk}, ConsistentRead=consistent)
        except ClientError as err:
            raise translate(err, f"get {sk}") from err
        item = out.get("Item")
        return None if item is None else plain(item)

    def query_prefix(self, prefix: str, consistent: bool = False) -> Iterator[dict[str, Any]]:
        """All items whose sort key starts with ``prefix``, following pagination."""
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": Key("pk").eq(self.pk) & Key("sk").begins_with(prefix),
            "ConsistentRead": consistent,
        }
        while True:
            try:
                out = self.table.query(**kwargs)
            except ClientError as err:
                raise translate(err, f"query {prefix}") from err
            for item in out.get("Items", []):
                yield plain(item)
            if "LastEvaluatedKey" not in out:
                return
            kwargs["ExclusiveStartKey"] = out["LastEvaluatedKey"]

    def query_partition(self, consistent: bool = False) -> Iterator[dict[str, Any]]:
        """Every item of the cluster's partition (LOCK, NODE#, CMD#, COMP#, RUN#, DETACH#), following pagination
        (DynamoDB returns up to 1 MB a call): one read of the whole state."""
        kwargs: dict[str, Any] = {"KeyConditionExpression": Key("pk").eq(self.pk), "ConsistentRead": consistent}
        while True:
            try:
                out = self.table.query(**kwargs)
            except ClientError as err:
                raise translate(err, "query partition") from err
            for item in out.get("Items", []):
                yield plain(item)
            if "LastEvaluatedKey" not in out:
                return
            kwargs["ExclusiveStartKey"] = out["LastEvaluatedKey"]

    def put(
        self, sk: str, attrs: dict[str, Any], condition: Any = None, conflict: type[ConflictError] = ConflictError
    ) -> None:
        item = dynamo({**attrs, "pk": self.pk, "sk": sk})
        kwargs: dict[str, Any] = {"Item": item}
        if condition is not None:
            kwargs["ConditionExpression"] = condition
            kwargs["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        try:
            self.table.put_item(**kwargs)
        except ClientError as err:
            raise translate(err, f"put {sk}", conflict) from err

    def delete(self, sk: str, condition: Any = None, conflict: type[ConflictError] = ConflictError) -> None:
        kwargs: dict[str, Any] = {"Key": {"pk": self.pk, "sk": sk}}
        if condition is not None:
            kwargs["ConditionExpression"] = condition
            kwargs["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        try:
            self.table.delete_item(**kwargs)
        except ClientError as err:
            raise translate(err, f"delete {sk}", conflict) from err

    def update(
        self, sk: str, values: dict[str, Any], condition: Any = None, conflict: type[ConflictError] = ConflictError
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
        if condition is not None:
            kwargs["ConditionExpression"] = condition
            kwargs["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        try:
            out = self.table.update_item(**kwargs)
        except ClientError as err:
            raise translate(err, f"update {sk}", conflict) from err
        return plain(out.get("Attributes", {}))

    # -- commands (CMD#) -----------------------------------------------------------------------------------

    @staticmethod
    def command_sk(command_id: str) -> str:
        return f"CMD#{command_id}"

    def record_command(self, command: Command, ttl_seconds: int, now: datetime | None = None) -> None:
        """Record a new command as ``queued``.

        Raises:
            CommandExistsError: a command with this id is already recorded (carries it as ``current``).
        """
        now = now or utcnow()
        self.put(
            self.command_sk(command.command_id),
            {
                "command": command.model_dump(mode="json"),
                "kind": command.kind.value,
                "instance_id": command.instance_id,
                "status": CommandStatus.QUEUED.value,
                "attempt": 0,
                "created_at": now.isoformat(),
                "updated_at": now.isoformat(),
                "expires_at": to_epoch(now) + ttl_seconds,
            },
            condition=Attr("pk").not_exists(),
            conflict=CommandExistsError,
        )

    def get_command(self, command_id: str) -> dict[str, Any] | None:
        return self.get(self.command_sk(command_id))

    def start_command(
        self, command: Command, worker: str, stale_after_seconds: int, ttl_seconds: int, now: datetime | None = None
    ) -> int:
        """Move a command to ``running`` for ``worker``; returns its attempt number (1, 2, ...).

        Allowed from: no item (a command that arrived without a record), ``queued``, or ``running`` whose
        heartbeat is older than ``stale_after_seconds`` (the worker died; its message was redelivered).

        Raises:
            CommandTransitionError: the command is terminal, or another live worker runs it (``current``
                holds the item).
        """
        now = now or utcnow()
        sk = self.command_sk(command.command_id)
        stale_before = now.timestamp() - stale_after_seconds
        condition = (
            Attr("pk").not_exists()
            | Attr("status").eq(CommandStatus.QUEUED.value)
            | (Attr("status").eq(CommandStatus.RUNNING.value) & Attr("heartbeat_at").lt(Decimal(str(stale_before))))
        )
        current = self.get(sk)
        attempt = int(current.get("attempt", 0)) + 1 if current else 1
        self.update(
            sk,
            {
                "command": current["command"] if current else command.model_dump(mode="json"),
                "kind": command.kind.value,
                "instance_id": command.instance_id,
                "status": CommandStatus.RUNNING.value,
                "attempt": attempt,
                "worker": worker,
                "heartbeat_at": now.timestamp(),
                "started_at": now.isoformat(),
                "updated_at": now.isoformat(),
                "created_at": current.get("created_at", now.isoformat()) if current else now.isoformat(),
                "expires_at": to_epoch(now) + ttl_seconds,
            },
            condition=condition & (Attr("attempt").not_exists() | Attr("attempt").eq(attempt - 1)),
            conflict=CommandTransitionError,
        )
        return attempt

    def heartbeat_command(
        self,
        command_id: str,
        worker: str,
        attempt: int,
        progress: dict[str, Any] | None = None,
        now: datetime | None = None,
    ) -> None:
        """Refresh a running command's heartbeat (and optional progress) while this worker owns it.

        Raises:
            CommandTransitionError: the command was taken over or finished.
        """
        now = now or utcnow()
        values: dict[str, Any] = {"heartbeat_at": now.timestamp(), "updated_at": now.isoformat()}
        if progress is not None:
            values["progress"] = progress
        self.update(
            self.command_sk(command_id),
            values,
            condition=Attr("status").eq(CommandStatus.RUNNING.value)
            & Attr("worker").eq(worker)
            & Attr("attempt").eq(attempt),
            conflict=CommandTransitionError,
        )

    def finish_command(
        self,
        command_id: str,
        worker: str,
        attempt: int,
        status: CommandStatus,
        result: dict[str, Any],
        now: datetime | None = None,
    ) -> None:
        """Move a running command owned by (worker, attempt) to a terminal ``status`` with its ``result``.

        Raises:
            ValueError: ``status`` is not terminal.
            CommandTransitionError: another worker took the command over, or it is already terminal.
        """
        if not status.terminal:
            raise ValueError(f"{status.value} is not a terminal status")
        now = now or utcnow()
        self.update(
            self.command_sk(command_id),
            {"status": status.value, "result": result, "finished_at": now.isoformat(), "updated_at": now.isoformat()},
            condition=Attr("status").eq(CommandStatus.RUNNING.value)
            & Attr("worker").eq(worker)
            & Attr("attempt").eq(attempt),
            conflict=CommandTransitionError,
        )

    def release_command(self, command_id: str, worker: str, attempt: int, now: datetime | None = None) -> None:
        """Hand a running command owned by (worker, attempt) back to ``queued``, so any worker may start it at once
        (an agent shutting down). The attempt counter stays, so the next start is ``attempt + 1``.

        Raises:
            CommandTransitionError: the command is no longer this worker's (taken over or finished).
        """
        now = now or utcnow()
        self.update(
            self.command_sk(command_id),
            {
                "status": CommandStatus.QUEUED.value,
                "worker": None,
                "heartbeat_at": None,
                "released_at": now.isoformat(),
                "updated_at": now.isoformat(),
            },
            condition=Attr("status").eq(CommandStatus.RUNNING.value)
            & Attr("worker").eq(worker)
            & Attr("attempt").eq(attempt),
            conflict=CommandTransitionError,
        )

    # -- membership (NODE#) --------------------------------------------------------------------------------

    def put_node(self, record: NodeRecord, ttl_seconds: int) -> None:
        self.put(
            f"NODE#{record.instance_id}",
            {**record.model_dump(mode="json"), "expires_at": to_epoch(record.reported_at) + ttl_seconds},
        )

    def delete_node(self, instance_id: str) -> None:
        self.delete(f"NODE#{instance_id}")

    def get_node(self, instance_id: str, max_age_seconds: float, now: datetime | None = None) -> NodeRecord | None:
        """The membership record of ``instance_id``, or None if absent or older than ``max_age_seconds``."""
        item = self.get(f"NODE#{instance_id}", consistent=False)
        if item is None:
            return None
        record = NodeRecord.model_validate(item)
        return record if record.fresh(now or utcnow(), max_age_seconds) else None

    def list_nodes(self, max_age_seconds: float, now: datetime | None = None) -> list[NodeRecord]:
        """Fresh membership records (stale ones are skipped, whatever TTL has or has not deleted)."""
        now = now or utcnow()
        records = [NodeRecord.model_validate(item) for item in self.query_prefix("NODE#")]
        return [r for r in records if r.fresh(now, max_age_seconds)]

    # -- early replacement (DETACH#) -----------------------------------------------------------------------

    def record_detach(
        self, instance_id: str, asg_name: str, reason: str, ttl_seconds: int, now: datetime | None = None
    ) -> bool:
        """Record the intent to detach ``instance_id`` from ``asg_name`` (before doing it).

        Returns False when it was already recorded (a duplicate event): the caller must not detach twice
        unless the record still says ``intended`` (a crash between record and detach).
        """
        now = now or utcnow()
        try:
            self.put(
                f"DETACH#{instance_id}",
                {
                    "instance_id": instance_id,
                    "asg_name": asg_name,
                    "reason": reason,
                    "state": "intended",
                    "recorded_at": now.isoformat(),
                    "expires_at": to_epoch(now) + ttl_seconds,
                },
                condition=Attr("pk").not_exists(),
            )
        except ConflictError:
            return False
        return True

    def get_detach(self, instance_id: str) -> dict[str, Any] | None:
        return self.get(f"DETACH#{instance_id}")

    def mark_detached(self, instance_id: str, state: str, now: datetime | None = None) -> None:
        now = now or utcnow()
        self.update(f"DETACH#{instance_id}", {"state": state, "updated_at": now.isoformat()})
