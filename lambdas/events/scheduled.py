"""Scheduled Event: what an EventBridge rule with a schedule expression sends (the replenisher's periodic tick;
the refresher's tick sends a constant input instead, see ``request``, but a plain schedule works too).

Example (shape from "Creating an Amazon EventBridge rule that runs on a schedule", EventBridge User Guide; fixture
of record ``tests/events/scheduled-tick.json``)::

    {
        "version": "0",
        "id": "0d9e8f7a-6b5c-4d3e-8f2a-1b0c9d8e7f60",
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": "123456789012",
        "time": "2024-03-05T10:45:00Z",
        "region": "us-east-1",
        "resources": ["arn:aws:events:us-east-1:123456789012:rule/node-manager-replenisher-tick"],
        "detail": {}
    }
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from lambdas.events.base import AwsEventModel
from lambdas.events.event import Event, EventKind

SOURCE = "aws.events"
DETAIL_TYPE = "Scheduled Event"


class ScheduledEvent(AwsEventModel):
    """The whole event (``detail`` is ``{}``; nothing of it is read)."""

    detail: dict[str, Any] = Field(default_factory=dict)


def to_event(event: ScheduledEvent) -> Event:
    """The schedule's event as an ``Event`` of kind ``tick``."""
    return Event(
        kind=EventKind.TICK,
        event_id=event.id,
        event_time=event.time,
        source=event.source,
        detail_type=event.detail_type,
        region=event.region,
        account=event.account,
    )
