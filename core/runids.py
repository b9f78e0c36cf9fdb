"""A refresh run's ids and the cluster-lock holder names of the invocations that advance it (re-exported by
``core.runs``)."""

from __future__ import annotations

import secrets
from datetime import datetime

__all__ = ["lock_holder", "new_invocation_id", "new_run_id", "run_id_of_holder"]


def new_run_id(now: datetime) -> str:
    """``<UTC yyyymmddThhmmssZ>-<6 hex>``: sorts by start time, unique."""
    return f"{now.strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(3)}"


def new_invocation_id() -> str:
    """An id for an invocation that has none of its own (no Lambda request id): 12 hex digits."""
    return secrets.token_hex(6)


def lock_holder(run_id: str, invocation: str | None = None) -> str:
    """The cluster-lock holder name ``refresher:<run id>:<invocation>`` (``refresher:<run id>`` without one).

    Each invocation advancing a run holds the lock under a name of its own: two concurrent invocations of one run
    (the tick and a drain result) are two holders, so one never renews, nor releases, the lease of the other.

    >>> lock_holder("20240101T000000Z-ab12cd", "req-1")
    'refresher:20240101T000000Z-ab12cd:req-1'
    """
    return f"refresher:{run_id}:{invocation}" if invocation else f"refresher:{run_id}"


def run_id_of_holder(holder: str | None) -> str | None:
    """The run id in a lock holder name ``refresher:<run id>[:<invocation>]``, else None.

    >>> run_id_of_holder("refresher:20240101T000000Z-ab12cd:req-1"), run_id_of_holder("refresher:r1")
    ('20240101T000000Z-ab12cd', 'r1')
    >>> run_id_of_holder("replenisher:req-1") is None
    True
    """
    if holder and holder.startswith("refresher:"):
        return holder.split(":", 2)[1] or None
    return None
