"""A refresh run's ids and the cluster-lock holder names of the invocations that advance it (re-exported by
``core.runs``)."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime

__all__ = ["hex_source", "lock_holder", "new_invocation_id", "new_run_id", "run_id_of_holder"]

_token_hex: Callable[[int], str] = secrets.token_hex  # n bytes -> 2n hex digits; ``hex_source`` swaps it


@contextmanager
def hex_source(token_hex: Callable[[int], str]) -> Iterator[None]:
    """Within the block, the ids' random hex comes from ``token_hex(n)`` (``n`` bytes, ``2n`` hex digits) instead
    of ``secrets.token_hex``: a deterministic simulation draws it from its seeded stream. Not thread-safe (one
    process-wide source); the product itself never calls it."""
    global _token_hex
    previous, _token_hex = _token_hex, token_hex
    try:
        yield
    finally:
        _token_hex = previous


def new_run_id(now: datetime) -> str:
    """``<UTC yyyymmddThhmmssZ>-<6 hex>``: sorts by start time, unique."""
    return f"{now.strftime('%Y%m%dT%H%M%SZ')}-{_token_hex(3)}"


def new_invocation_id() -> str:
    """An id for an invocation that has none of its own (no Lambda request id): 12 hex digits."""
    return _token_hex(6)


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
