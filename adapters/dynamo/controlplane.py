"""The cluster's control-plane drain slots in the table: ``CPDRAIN#<slot>`` items, one per drain of a control-plane
node in flight, taken and given back by conditional writes so that at most ``slots`` run at once in the whole
cluster, whichever agent process (leader, standby taking over, a second deployment by mistake) runs them.

An item::

    CPDRAIN#<slot>   command_id, instance_id, worker, claimed_at (ISO 8601), expires_at (epoch s, the TTL attribute)

A slot is free when it has no item or its ``expires_at`` is past (the holder's drain cannot run beyond its deadline,
which ``expires_at`` is set to: a worker that died holding it does not block the control plane for longer). A slot
held by the same ``command_id`` is the caller's own (a worker taking over a stale command, or the drain step after
the cordon step): claiming it again renews it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from adapters.dynamo.table import Attr, Table
from core.exceptions import ConflictError
from core.model import to_epoch

PREFIX = "CPDRAIN#"


def slot_sk(slot: int) -> str:
    """The sort key of control-plane drain slot ``slot`` (0-based)."""
    return f"{PREFIX}{slot}"


@dataclass(frozen=True)
class SlotClaim:
    """What ``ControlPlaneSlots.claim`` got: ``slot`` (None: every slot is held) and the command ids of the
    holders it met (``holders``, for logs)."""

    slot: int | None
    holders: tuple[str, ...] = ()


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
        free or expired one of ``slots``. One consistent Query, then one conditional put per slot tried.

        Raises:
            StoreUnavailableError: DynamoDB throttled or could not be reached (retryable).
            AwsRequestError: any other refusal.
        """
        epoch = to_epoch(now)
        held = {int(item["sk"][len(PREFIX) :]): item for item in self.table.query_prefix(PREFIX, consistent=True)}
        mine = [slot for slot, item in held.items() if item.get("command_id") == command_id and slot < slots]
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
            return SlotClaim(slot, tuple(holders))
        return SlotClaim(None, tuple(holders))

    def release(self, command_id: str) -> int:
        """Give back every slot ``command_id`` holds (a slot another command took over meanwhile is left). Returns
        how many were given back.

        Raises:
            StoreUnavailableError, AwsRequestError: as ``claim``.
        """
        released = 0
        for item in self.table.query_prefix(PREFIX, consistent=True):
            if item.get("command_id") != command_id:
                continue
            try:
                self.table.delete(str(item["sk"]), condition=Attr("command_id").eq(command_id))
            except ConflictError:
                continue
            released += 1
        return released
