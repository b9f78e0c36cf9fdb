"""EC2 Instance State-change Notification: an instance changed state. Handled for ``stopping``, ``shutting-down``
and ``terminated`` (the stack's rule matches only those): the instance's node is going, so its membership record
is removed and its queued commands are cancelled.

Example (shape from "EC2 Instance State-change Notification", Amazon EventBridge events for EC2; fixture of
record ``tests/events/ec2-state-change-terminated.json``)::

    {
        "version": "0",
        "id": "7bf73129-1428-4cd3-a780-95db273d1602",
        "detail-type": "EC2 Instance State-change Notification",
        "source": "aws.ec2",
        "account": "123456789012",
        "time": "2024-03-05T10:17:40Z",
        "region": "us-east-1",
        "resources": ["arn:aws:ec2:us-east-1:123456789012:instance/i-0a1b2c3d4e5f60718"],
        "detail": {"instance-id": "i-0a1b2c3d4e5f60718", "state": "terminated"}
    }

States: pending, running, stopping, stopped, shutting-down, terminated.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from core.model import INSTANCE_ID_RE
from lambdas.events.base import AwsEventModel
from lambdas.events.event import Event, EventKind

SOURCE = "aws.ec2"
DETAIL_TYPE = "EC2 Instance State-change Notification"
GOING_STATES = ("stopping", "shutting-down", "terminated")

InstanceState = Literal["pending", "running", "stopping", "stopped", "shutting-down", "terminated"]


class StateChangeDetail(BaseModel):
    """``detail``: ``{"instance-id": "i-...", "state": "<state>"}``."""

    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="ignore")

    instance_id: str = Field(alias="instance-id", pattern=INSTANCE_ID_RE.pattern)
    state: InstanceState


class InstanceStateChange(AwsEventModel):
    """The whole event (EventBridge envelope with a typed ``detail``)."""

    detail: StateChangeDetail


def to_event(event: InstanceStateChange) -> Event:
    """The event as an ``Event`` of kind ``instance_state_change`` carrying the new state."""
    return Event(
        kind=EventKind.INSTANCE_STATE_CHANGE,
        event_id=event.id,
        event_time=event.time,
        instance_id=event.detail.instance_id,
        instance_state=event.detail.state,
        source=event.source,
        detail_type=event.detail_type,
        region=event.region,
        account=event.account,
    )
