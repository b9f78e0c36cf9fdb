"""What a fenced put writes beside its item in one ``TransactWriteItems`` (``adapters.dynamo.table``, "Fencing"): the
``LOCK`` item's write that takes the lock (``Taking``) and the other whole items of the transaction (``AlsoPut``), and
how many of those one call holds (``MAX_ALSO``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from boto3.dynamodb.conditions import ConditionBase

from core.exceptions import ConflictError
from core.lock import Lease


@dataclass(frozen=True)
class AlsoPut:
    """A whole item written in a fenced put's transaction, after the put (``Table.put(..., also=...)``): ``sk`` and
    its ``attrs`` (no keys), written only if ``condition`` holds; its loss raises ``conflict`` (carrying the item)
    and nothing of the transaction is written."""

    sk: str
    attrs: dict[str, Any]
    condition: ConditionBase | None = None
    conflict: type[ConflictError] = ConflictError


# DynamoDB's limit of actions in one TransactWriteItems ("TransactWriteItems", API reference): the LOCK item's, the
# put's, and at most this many more
MAX_ALSO = 98


@dataclass(frozen=True)
class Taking:
    """The ``LOCK`` item's write that takes the lock (``LeaseLock.taking``), made inside a fenced put's transaction
    in place of its ``ConditionCheck``: ``lease`` is the lease taken, the one the put is fenced by. ``holds``
    False: the write leaves the lock free (``LeaseLock.passing``: taken and given up in the one write)."""

    lease: Lease
    attrs: dict[str, Any]
    condition: ConditionBase
    holds: bool = True
