"""The cluster lock: a lease with a fencing counter, kept in the ``LOCK`` item by conditional writes.

Capacity operations (replenish, scale-back, refresh, surplus cleanup) take it so that a spare node one of them
launched is never judged surplus by another (DESIGN.md). The item holds::

    holder           who holds it (e.g. "refresher:<run id>")
    operation        what for (e.g. "refresh")
    lease_expires_at epoch seconds (float); after it, anyone may take the lock over
    fencing          a counter raised on every acquisition by a new holder, never on renewal

A holder passes its fencing value along with the writes it makes under the lock, so a writer whose lease was
taken over can be told apart from the current one (the classic fencing-token scheme).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from boto3.dynamodb.conditions import Attr

from core.exceptions import ConflictError, LockHeldError, LockLostError
from core.store import Store

LOCK_SK = "LOCK"


@dataclass(frozen=True)
class Lease:
    """A lease this process holds."""

    holder: str
    operation: str
    fencing: int
    expires_at: float  # epoch seconds


class LeaseLock:
    """Acquire, renew and release the cluster lock.

    Args:
        store: the cluster's table access.
        clock: returns epoch seconds; injectable for tests.
    """

    def __init__(self, store: Store, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock

    def acquire(
        self, holder: str, operation: str, lease_seconds: float, *, seen: dict | None = None, use_seen: bool = False
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
        current = seen if use_seen else self.store.get(LOCK_SK)
        if current is not None and current.get("holder") == holder and float(current["lease_expires_at"]) > now:
            return self.renew(
                Lease(holder, current["operation"], int(current["fencing"]), float(current["lease_expires_at"])),
                lease_seconds,
            )
        previous = int(current["fencing"]) if current else 0
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
            self.store.put(
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
            raise LockHeldError(f"lock held by {self._who(err.current)}", err.current) from err
        return Lease(holder, operation, previous + 1, expires)

    def renew(self, lease: Lease, lease_seconds: float) -> Lease:
        """Extend a held lease.

        Raises:
            LockLostError: the lease expired and was taken over, or released.
        """
        now = self.clock()
        expires = now + lease_seconds
        try:
            self.store.update(
                LOCK_SK,
                {"lease_expires_at": expires, "renewed_at": now},
                condition=Attr("holder").eq(lease.holder) & Attr("fencing").eq(lease.fencing),
                conflict=LockLostError,
            )
        except LockLostError as err:
            raise LockLostError(f"lease of {lease.holder} was lost to {self._who(err.current)}", err.current) from err
        return Lease(lease.holder, lease.operation, lease.fencing, expires)

    def release(self, lease: Lease) -> None:
        """Give the lock up; the fencing counter stays so the next holder gets a higher value.

        Releasing a lease already lost is not an error (there is nothing left to give up).
        """
        try:
            self.store.update(
                LOCK_SK,
                {"holder": None, "operation": None, "lease_expires_at": 0, "released_at": self.clock()},
                condition=Attr("holder").eq(lease.holder) & Attr("fencing").eq(lease.fencing),
            )
        except ConflictError:
            pass

    def current(self) -> dict | None:
        """The lock item as stored (holder None when free), for status displays."""
        return self.store.get(LOCK_SK)

    @staticmethod
    def _who(item: dict | None) -> str:
        if not item:
            return "nobody"
        return f"{item.get('holder')} ({item.get('operation')}, fencing {item.get('fencing')})"
