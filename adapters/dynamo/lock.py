"""The cluster lock in the table: the ``LOCK`` item (``core.lock``), taken, renewed and released by conditional
writes.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from adapters.dynamo.table import LOCK_SK, Attr, Table
from core.exceptions import ConflictError, LockHeldError, LockLostError
from core.lock import Lease, describe, fencing_of, renewable_by

__all__ = ["LOCK_SK", "LeaseLock"]


class LeaseLock:
    """Acquire, renew and release the cluster lock.

    Args:
        table: the cluster's table partition.
        clock: returns epoch seconds; injectable for tests.
    """

    def __init__(self, table: Table, clock: Callable[[], float] = time.time) -> None:
        self.table = table
        self.clock = clock

    def acquire(
        self,
        holder: str,
        operation: str,
        lease_seconds: float,
        *,
        seen: dict[str, Any] | None = None,
        use_seen: bool = False,
    ) -> Lease:
        """Take the lock for ``lease_seconds``, or renew it if ``holder`` already holds it.

        A new holder (the lock was free or its lease had expired) gets fencing = previous + 1; a renewal keeps
        the fencing value.

        Args:
            seen, use_seen: with ``use_seen``, ``seen`` is the ``LOCK`` item as the caller already read it (None:
                there was none), e.g. in a Query of the whole partition. The read is skipped and the acquisition
                is conditioned on exactly that item, so it fails if the lock changed hands since the caller
                looked (what the caller decided on that read is still valid once it holds the lock).

        Raises:
            LockHeldError: another holder's lease is still valid (``current`` is the lock item), or, with
                ``use_seen``, the lock changed since it was read.
        """
        now = self.clock()
        expires = now + lease_seconds
        current = seen if use_seen else self.table.get(LOCK_SK)
        held = renewable_by(current, holder, now)
        if held is not None:
            return self.renew(held, lease_seconds)
        previous = fencing_of(current)
        # Free, expired, or released; the condition pins the exact item we looked at (by fencing) so two
        # contenders reading the same expired lease cannot both win.
        condition = (
            Attr("pk").not_exists()
            if current is None
            else (
                Attr("fencing").eq(previous)
                & (Attr("lease_expires_at").lt(Decimal(str(now))) | Attr("holder").not_exists())
            )
        )
        try:
            self.table.put(
                LOCK_SK,
                {
                    "holder": holder,
                    "operation": operation,
                    "lease_expires_at": expires,
                    "fencing": previous + 1,
                    "acquired_at": now,
                },
                condition=condition,
                conflict=LockHeldError,
            )
        except LockHeldError as err:
            raise LockHeldError(f"lock held by {describe(err.current)}", err.current) from err
        return Lease(holder, operation, previous + 1, expires)

    def renew(self, lease: Lease, lease_seconds: float) -> Lease:
        """Extend a held lease.

        Raises:
            LockLostError: the lease expired and was taken over, or released.
        """
        now = self.clock()
        expires = now + lease_seconds
        try:
            self.table.update(
                LOCK_SK,
                {"lease_expires_at": expires, "renewed_at": now},
                condition=Attr("holder").eq(lease.holder) & Attr("fencing").eq(lease.fencing),
                conflict=LockLostError,
            )
        except LockLostError as err:
            raise LockLostError(f"lease of {lease.holder} was lost to {describe(err.current)}", err.current) from err
        return Lease(lease.holder, lease.operation, lease.fencing, expires)

    def release(self, lease: Lease) -> None:
        """Give the lock up; the fencing counter stays so the next holder gets a higher value.

        Releasing a lease already lost is not an error (there is nothing left to give up).
        """
        with contextlib.suppress(ConflictError):
            self.table.update(
                LOCK_SK,
                {"holder": None, "operation": None, "lease_expires_at": 0, "released_at": self.clock()},
                condition=Attr("holder").eq(lease.holder) & Attr("fencing").eq(lease.fencing),
            )

    def current(self) -> dict[str, Any] | None:
        """The lock item as stored (holder None when free), for status displays."""
        return self.table.get(LOCK_SK)
