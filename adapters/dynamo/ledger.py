"""The compensation ledger in the table: one ``COMP#<asg>`` item per group (``core.ledger.Ledger``), written as a
whole and conditioned on its ``version``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from adapters.dynamo.table import Attr, Table
from core.exceptions import LedgerConflictError
from core.ledger import Ledger
from core.lock import Lease

PREFIX = "COMP#"


def ledger_sk(asg_name: str) -> str:
    """The sort key of a group's ledger."""
    return f"{PREFIX}{asg_name}"


def from_item(item: dict[str, Any]) -> Ledger:
    """A ``COMP#`` item as read from the table (``pk``/``sk``/``expires_at`` ignored).

    Raises:
        pydantic.ValidationError: the item does not have the ledger's shape.
    """
    return Ledger.model_validate({k: v for k, v in item.items() if k not in ("pk", "sk", "expires_at")})


def write(
    table: Table, ledger: Ledger, expected_version: int | None, now: datetime, fence: Lease | None = None
) -> Ledger:
    """Put ``ledger`` as version ``expected_version + 1`` (1 for a new item).

    Args:
        expected_version: the version read (None: the item must not exist yet).
        fence: the cluster lock's lease this write is made under: the write applies only while it is the lock's
            current lease (``Table.put``); None: not fenced (a write no AWS effect follows).

    Returns:
        The ledger as written.

    Raises:
        LockLostError: (with ``fence``) the lock changed hands; nothing was written.
        LedgerConflictError: the item changed (or appeared) since it was read; ``current`` holds it.
        StoreUnavailableError: DynamoDB throttled or unavailable.
    """
    new = ledger.model_copy(update={"version": (expected_version or 0) + 1, "updated_at": now})
    condition = Attr("pk").not_exists() if expected_version is None else Attr("version").eq(expected_version)
    table.put(
        ledger_sk(new.asg_name),
        new.model_dump(mode="json"),
        condition=condition,
        conflict=LedgerConflictError,
        fence=fence,
    )
    return new
