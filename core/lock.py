"""The cluster lock: a lease with a fencing counter, kept in the ``LOCK`` item by conditional writes.

Capacity operations (replenish, scale-back, refresh, surplus cleanup) take it so that a spare node one of them
launched is never judged surplus by another (DESIGN.md). The item holds::

    holder           who holds it (e.g. "refresher:<run id>:<invocation id>")
    operation        what for (e.g. "refresh")
    lease_expires_at epoch seconds (float); after it, anyone may take the lock over
    fencing          a counter raised on every acquisition by a new holder, never on renewal

A holder passes its fencing value along with the writes it makes under the lock, so a writer whose lease was
taken over can be told apart from the current one (the classic fencing-token scheme).

The lease model and its rules are here; the conditional writes are ``adapters.dynamo.lock.LeaseLock``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# A lease outlives the longest invocation that holds it by at least this much (seconds): what a holder does after
# its last renewal (the AWS calls in flight when Lambda stops it, a retry of the event, clock skew between holders).
LEASE_MARGIN_SECONDS = 30


def lease_too_short(lease_seconds: float, timeout_seconds: float | None) -> str | None:
    """Why a lease of ``lease_seconds`` cannot protect an invocation that may run ``timeout_seconds`` (a Lambda
    function's timeout), or None when it can (or the timeout is unknown).

    A lease shorter than the invocation plus ``LEASE_MARGIN_SECONDS`` may expire while the holder still acts: another
    holder then takes the lock over, and the two act at once until the first one's fenced writes are refused.
    """
    if timeout_seconds is None or lease_seconds >= timeout_seconds + LEASE_MARGIN_SECONDS:
        return None
    return (
        f"a lease of {lease_seconds:g} s must be at least the function timeout ({timeout_seconds:g} s) plus "
        f"{LEASE_MARGIN_SECONDS} s, or it may expire while the holder still acts"
    )


@dataclass(frozen=True)
class Lease:
    """A lease this process holds."""

    holder: str
    operation: str
    fencing: int
    expires_at: float  # epoch seconds


def renewable_by(item: dict[str, Any] | None, holder: str, now: float) -> Lease | None:
    """The lease ``holder`` still holds according to the ``LOCK`` item (so acquiring is a renewal), else None.

    Args:
        now: epoch seconds.
    """
    if item is None or item.get("holder") != holder or float(item["lease_expires_at"]) <= now:
        return None
    return Lease(holder, str(item["operation"]), int(item["fencing"]), float(item["lease_expires_at"]))


def valid_holder(item: dict[str, Any] | None, now: float) -> str | None:
    """The holder whose lease in the ``LOCK`` item is still valid at ``now`` (epoch seconds), else None (never taken,
    released, or expired: anyone may take it)."""
    if not item or not item.get("holder") or float(item.get("lease_expires_at") or 0) <= now:
        return None
    return str(item["holder"])


def fencing_of(item: dict[str, Any] | None) -> int:
    """The fencing counter of the ``LOCK`` item (0 when there is none); a new holder gets this plus one."""
    return int(item["fencing"]) if item else 0


def describe(item: dict[str, Any] | None) -> str:
    """Who holds the lock, for messages: ``holder (operation, fencing n)`` or ``nobody``."""
    if not item:
        return "nobody"
    return f"{item.get('holder')} ({item.get('operation')}, fencing {item.get('fencing')})"


def held_seconds(item: Mapping[str, Any] | None, now: float) -> float:
    """Seconds since the ``LOCK`` item's current holder acquired it (``acquired_at``, epoch seconds), 0 when the lock
    was never taken or is released (no ``holder``). An expired lease still counts: an abandoned lock is what the
    ``LockHeldTooLong`` alarm is for. ``now``: epoch seconds. Pure."""
    if not item or not item.get("holder"):
        return 0.0
    acquired = float(item.get("acquired_at") or now)
    return max(0.0, now - acquired)
