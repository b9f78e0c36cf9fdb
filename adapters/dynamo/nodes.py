"""Membership in the table: one ``NODE#<instance-id>`` item per node, written by the agent's leader.

Each item is a ``core.model.NodeRecord`` (instance id, node name, ASG, readiness, ``reported_at``) plus
``expires_at``; readers judge freshness by ``reported_at`` themselves (``NodeRecord.fresh``), whatever TTL did.
"""

from __future__ import annotations

from datetime import datetime

from adapters.dynamo.table import Table
from core.model import NodeRecord, to_epoch, utcnow

PREFIX = "NODE#"


def node_sk(instance_id: str) -> str:
    """The sort key of an instance's membership item."""
    return f"{PREFIX}{instance_id}"


class NodeItems(Table):
    """``NODE#`` items of one cluster."""

    def put_node(self, record: NodeRecord, ttl_seconds: int) -> None:
        self.put(
            node_sk(record.instance_id),
            {**record.model_dump(mode="json"), "expires_at": to_epoch(record.reported_at) + ttl_seconds},
        )

    def delete_node(self, instance_id: str) -> None:
        self.delete(node_sk(instance_id))

    def get_node(self, instance_id: str, max_age_seconds: float, now: datetime | None = None) -> NodeRecord | None:
        """The membership record of ``instance_id``, or None if absent or older than ``max_age_seconds``."""
        item = self.get(node_sk(instance_id), consistent=False)
        if item is None:
            return None
        record = NodeRecord.model_validate(item)
        return record if record.fresh(now or utcnow(), max_age_seconds) else None

    def list_nodes(self, max_age_seconds: float, now: datetime | None = None) -> list[NodeRecord]:
        """Fresh membership records (stale ones are skipped, whatever TTL has or has not deleted)."""
        now = now or utcnow()
        records = [NodeRecord.model_validate(item) for item in self.query_prefix(PREFIX)]
        return [r for r in records if r.fresh(now, max_age_seconds)]
