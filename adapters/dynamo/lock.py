"""The cluster lock in the table: the ``LOCK`` item (``core.lock``), taken, renewed and released by conditional
writes.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from adapters.dynamo.table import LOCK_SK, Attr, Table, Taking
from core.exceptions import ConflictError, LockHeldError, LockLostError
from core.lock import Lease, describe, fencing_of, renewable_by

__all__ = ["LOCK_SK", "LeaseLock", "Taking"]


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
        current = seen if use_seen else self.table.get(LOCK_SK)
        held = renewable_by(current, holder, self.clock())
        if held is not None:
            return self.renew(held, lease_seconds)
        taking = self.taking(holder, operation, lease_seconds, current)
        try:
            self.table.put(LOCK_SK, taking.attrs, condition=taking.condition, conflict=LockHeldError)
        except LockHeldError as err:
            raise LockHeldError(f"lock held by {describe(err.current)}", err.current) from err
        return taking.lease

    def taking(self, holder: str, operation: str, lease_seconds: float, seen: dict[str, Any] | None) -> Taking:
        """The write that takes the lock from the ``LOCK`` item as ``seen`` (None: there was none) for a holder
        that does not hold it: what ``acquire(..., seen=seen, use_seen=True)`` writes, for a caller that makes it
        inside its own first fenced write (``Table.put(..., take=...)``: one transaction takes the lock and writes,
        ``LockHeldError`` when the lock changed hands since ``seen`` was read). A new holder gets fencing =
        previous + 1."""
        now = self.clock()
        previous = fencing_of(seen)
        # Free, expired, or released; the condition pins the exact item we looked at (by fencing) so two
        # contenders reading the same expired lease cannot both win.
        condition = (
            Attr("pk").not_exists()
            if seen is None
            else (
                Attr("fencing").eq(previous)
                & (Attr("lease_expires_at").lt(Decimal(str(now))) | Attr("holder").not_exists())
            )
        )
        lease = Lease(holder, operation, previous + 1, now + lease_seconds)
        attrs = {
            "holder": holder,
            "operation": operation,
            "lease_expires_at": lease.expires_at,
            "fencing": lease.fencing,
            "acquired_at": now,
        }
        return Taking(lease, attrs, condition)

    def passing(self, holder: str, operation: str, seen: dict[str, Any] | None) -> Taking:
        """``taking``'s write, but leaving the lock free: the ``LOCK`` item as ``seen`` (free or expired, pinned by
        its fencing) becomes a released item with fencing = previous + 1 (a holder of an older lease still finds
        it lost). For a write after which the holder applies nothing that needs the lock (a refresher pass whose
        only effects are drain commands recorded in that same transaction, the SQS message a doorbell): the write
        is fenced as a take is (``LockHeldError`` when the lock changed hands since ``seen`` was read), and the
        release costs no write of its own."""
        taking = self.taking(holder, operation, 0, seen)
        now = self.clock()
        attrs = {"fencing": taking.lease.fencing, "lease_expires_at": 0, "acquired_at": now, "released_at": now}
        return Taking(taking.lease, attrs, taking.condition, holds=False)

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
