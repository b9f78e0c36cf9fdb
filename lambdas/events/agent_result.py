"""The agent's drain results: "Node Drain Succeeded" / "Node Drain Failed" / "Node Drain Skipped".

Sent by the agent (``agent/report.py``) on the default bus. The replenisher listens to them so the give-back of a
compensating instance moves on as soon as its drain ends (the periodic tick would find the ``CMD#`` status too).
Example (fixture of record ``tests/events/agent-drain-succeeded.json``)::

    {
        "version": "0", "id": "5b8e2f0c-1a3d-4c5e-8f7a-9b0c1d2e3f40",
        "detail-type": "Node Drain Succeeded", "source": "node-manager.agent",
        "account": "123456789012", "time": "2024-03-05T10:30:02Z", "region": "us-east-1", "resources": [],
        "detail": {"command_id": "giveback-i-0a1b2c3d4e5f60718", "cluster": "demo.k8s.local",
                   "instance_id": "i-0a1b2c3d4e5f60718", "node_name": "ip-10-0-1-17.ec2.internal",
                   "kind": "drain", "status": "succeeded", "reason": "...", "attempt": 1,
                   "worker": "agent-7d9f:12", "summary": {"message": "...", "evicted": 4, "remaining": 0}}
    }
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from lambdas.events.base import AwsEventModel
from lambdas.events.event import Event, EventKind

SOURCE = "node-manager.agent"
DRAIN_DETAIL_TYPES = ("Node Drain Succeeded", "Node Drain Failed", "Node Drain Skipped")
# A cordon's result reaches the refresher only for a rebalance cordon (``REBALANCE_POLICY=replace``: the wake-up of
# the replacement run the interruption Lambda started just before sending that cordon). Same detail, same kind.
CORDON_DETAIL_TYPES = ("Node Cordon Succeeded", "Node Cordon Failed", "Node Cordon Skipped")


class DrainResultDetail(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    command_id: str = Field(min_length=1, max_length=200)
    cluster: str = Field(min_length=1)
    instance_id: str | None = None
    status: str = ""


class DrainResult(AwsEventModel):
    detail: DrainResultDetail


def to_event(event: DrainResult) -> Event:
    """The result as an ``Event`` of kind ``drain_finished``."""
    return Event(
        kind=EventKind.DRAIN_FINISHED,
        event_id=event.id,
        event_time=event.time,
        instance_id=event.detail.instance_id,
        command_id=event.detail.command_id,
        cluster=event.detail.cluster,
        source=event.source,
        detail_type=event.detail_type,
        region=event.region,
        account=event.account,
    )
