"""Early replacement in the table: the ``DETACH#<instance-id>`` items (``core.detach.DetachState``).

An item holds ``instance_id``, ``asg_name``, ``reason``, ``state`` (``intended`` -> ``detached``), ``recorded_at``,
``updated_at`` and ``expires_at``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from adapters.dynamo.table import Attr, Table
from core.detach import DetachState
from core.exceptions import ConflictError
from core.model import to_epoch, utcnow

PREFIX = "DETACH#"


def detach_sk(instance_id: str) -> str:
    """The sort key of an instance's detach record."""
    return f"{PREFIX}{instance_id}"


class DetachItems(Table):
    """``DETACH#`` items of one cluster."""

    def record_detach(
        self, instance_id: str, asg_name: str, reason: str, ttl_seconds: int, now: datetime | None = None
    ) -> bool:
        """Record the intent to detach ``instance_id`` from ``asg_name`` (before doing it).

        Returns False when it was already recorded (a duplicate event): the caller must not detach twice
        unless the record still says ``intended`` (a crash between record and detach).
        """
        now = now or utcnow()
        try:
            self.put(
                detach_sk(instance_id),
                {
                    "instance_id": instance_id,
                    "asg_name": asg_name,
                    "reason": reason,
                    "state": DetachState.INTENDED.value,
                    "recorded_at": now.isoformat(),
                    "expires_at": to_epoch(now) + ttl_seconds,
                },
                condition=Attr("pk").not_exists(),
            )
        except ConflictError:
            return False
        return True

    def get_detach(self, instance_id: str) -> dict[str, Any] | None:
        """The ``DETACH#`` item of ``instance_id`` (consistent read), None if there is none."""
        return self.get(detach_sk(instance_id))

    def mark_detached(self, instance_id: str, state: DetachState | str, now: datetime | None = None) -> None:
        """Move the record to ``state`` (``DetachState.DETACHED`` once DetachInstances is done)."""
        now = now or utcnow()
        self.update(detach_sk(instance_id), {"state": DetachState(state).value, "updated_at": now.isoformat()})
