"""The cluster's control-plane drain slots in the table: ``CPDRAIN#<slot>`` items, one per drain of a control-plane
node in flight, taken and given back by conditional writes so that at most ``slots`` run at once in the whole
cluster, whichever agent process (leader, standby taking over, a second deployment by mistake) runs them.

An item::

    CPDRAIN#<slot>   command_id, instance_id, worker, claimed_at (ISO 8601), expires_at (epoch s, the TTL attribute)

An item under the prefix whose suffix is not a slot number (``0`` .. ``slots - 1``, written as ``slot_sk`` does) is
no slot: a claim skips it and names it in ``SlotClaim.ignored`` (the caller logs it).

A slot is free when it has no item or its ``expires_at`` is past (the holder's drain cannot run beyond its deadline,
which ``expires_at`` is set to: a worker that died holding it does not block the control plane for longer). A slot
held by the same ``command_id`` is the caller's own (a worker taking over a stale command, or the drain step after
the cordon step): claiming it again renews it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from boto3.dynamodb.conditions import ConditionBase

from adapters.dynamo.table import Attr, Table
from core.exceptions import ConflictError
from core.model import to_epoch

PREFIX = "CPDRAIN#"


def slot_sk(slot: int) -> str:
    """The sort key of control-plane drain slot ``slot`` (0-based)."""
    return f"{PREFIX}{slot}"


@dataclass(frozen=True)
class SlotClaim:
    """What ``ControlPlaneSlots.claim`` got: ``slot`` (None: every slot is held), the command ids of the
    holders it met (``holders``, for logs) and the sort keys of items under the prefix that are no slot
    (``ignored``: not a slot number below ``slots``, for logs)."""

    slot: int | None
    holders: tuple[str, ...] = ()
    ignored: tuple[str, ...] = ()


def slot_of(sk: str, slots: int) -> int | None:
    """The slot number a ``CPDRAIN#`` sort key names, None when it names none of ``slots`` (a suffix that is not
    a number ``slot_sk`` writes, e.g. ``CPDRAIN#x``, ``CPDRAIN#01``, or one at or above ``slots``). Pure."""
    suffix = sk[len(PREFIX) :] if sk.startswith(PREFIX) else ""
    if not (suffix.isascii() and suffix.isdigit()) or slot_sk(int(suffix)) != sk:
        return None
    slot = int(suffix)
    return slot if slot < slots else None


class ControlPlaneSlots:
    """Claims and gives back control-plane drain slots.

    Args:
        table: the cluster's table partition.
    """

    def __init__(self, table: Table) -> None:
        self.table = table

    def claim(
        self, command_id: str, instance_id: str, worker: str, slots: int, expires_at: datetime, now: datetime
    ) -> SlotClaim:
        """Take a slot for ``command_id`` until ``expires_at``: the one it already holds (renewed), else the first
        free or expired one of ``slots``. One consistent Query, then one conditional put per slot tried. An item
        that is no slot (``slot_of``) is skipped and named in the answer's ``ignored``.

        Raises:
            StoreUnavailableError: DynamoDB throttled or could not be reached (retryable).
            AwsRequestError: any other refusal.
        """
        epoch = to_epoch(now)
        held: dict[int, dict[str, Any]] = {}
        ignored: list[str] = []
        for item in self.table.query_prefix(PREFIX, consistent=True):
            slot = slot_of(str(item.get("sk", "")), slots)
            if slot is None:
                ignored.append(str(item.get("sk", "")))
            else:
                held[slot] = item
        mine = [slot for slot, item in held.items() if item.get("command_id") == command_id]
        order = mine + [slot for slot in range(slots) if slot not in mine]
        holders: list[str] = []
        for slot in order:
            try:
                self.table.put(
                    slot_sk(slot),
                    {
                        "command_id": command_id,
                        "instance_id": instance_id,
                        "worker": worker,
                        "claimed_at": now.isoformat(),
                        "expires_at": to_epoch(expires_at),
                    },
                    condition=Attr("pk").not_exists()
                    | Attr("command_id").eq(command_id)
                    | Attr("expires_at").lt(epoch),
                )
            except ConflictError as err:
                holders.append(str((err.current or {}).get("command_id", "?")))
                continue
            return SlotClaim(slot, tuple(holders), tuple(ignored))
        return SlotClaim(None, tuple(holders), tuple(ignored))

    def release(self, command_id: str, worker: str | None = None) -> int:
        """Give back every slot ``command_id`` holds (a slot another command took over meanwhile is left); with
        ``worker``, only a slot that worker claimed last: a worker whose command another took over (same command id,
        its claim renewed the slot under its own name) gives back nothing that worker's drain still holds. Returns
        how many were given back.

        Raises:
            StoreUnavailableError, AwsRequestError: as ``claim``.
        """
        released = 0
        for item in self.table.query_prefix(PREFIX, consistent=True):
            if item.get("command_id") != command_id or (worker is not None and item.get("worker") != worker):
                continue
            condition: ConditionBase = Attr("command_id").eq(command_id)
            if worker is not None:
                condition = condition & Attr("worker").eq(worker)
            try:
                self.table.delete(str(item["sk"]), condition=condition)
            except ConflictError:
                continue
            released += 1
        return released
