"""EC2 Spot Instance Interruption Warning: two minutes before EC2 stops, hibernates or terminates a Spot instance.

Example (shape from "Spot Instance interruption notices", Amazon EC2 User Guide; the fixture of record is
``tests/events/spot-interruption-warning.json``)::

    {
        "version": "0",
        "id": "7e2b6a4c-3f1d-4c8a-9b2e-5d6f7a8b9c01",
        "detail-type": "EC2 Spot Instance Interruption Warning",
        "source": "aws.ec2",
        "account": "123456789012",
        "time": "2024-03-05T10:15:30Z",
        "region": "us-east-1",
        "resources": ["arn:aws:ec2:us-east-1a:instance/i-0a1b2c3d4e5f60718"],
        "detail": {"instance-id": "i-0a1b2c3d4e5f60718", "instance-action": "terminate"}
    }

The resource ARN of this event names the Availability Zone and no account (AWS documents this deviation from the
usual EC2 ARN format); it is not used. For ``hibernate`` the warning is not two minutes ahead: hibernation starts at
once.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from core.model import INSTANCE_ID_RE
from lambdas.events.base import AwsEventModel
from lambdas.events.event import Event, EventKind, InstanceAction

SOURCE = "aws.ec2"
DETAIL_TYPE = "EC2 Spot Instance Interruption Warning"


class SpotInterruptionDetail(BaseModel):
    """``detail`` of the warning: ``{"instance-id": "i-...", "instance-action": "terminate|stop|hibernate"}``."""

    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="ignore")

    instance_id: str = Field(alias="instance-id", pattern=INSTANCE_ID_RE.pattern)
    instance_action: InstanceAction = Field(alias="instance-action")


class SpotInterruptionWarning(AwsEventModel):
    """The whole event (EventBridge envelope with a typed ``detail``)."""

    detail: SpotInterruptionDetail


def to_event(event: SpotInterruptionWarning) -> Event:
    """The warning as an ``Event`` of kind ``spot_interruption``."""
    return Event(
        kind=EventKind.SPOT_INTERRUPTION,
        event_id=event.id,
        event_time=event.time,
        instance_id=event.detail.instance_id,
        instance_action=event.detail.instance_action,
        source=event.source,
        detail_type=event.detail_type,
        region=event.region,
        account=event.account,
    )
