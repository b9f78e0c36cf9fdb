"""EC2 Instance Launch Unsuccessful: an Auto Scaling group tried to launch and could not (no Spot capacity in the
AZ, a price, a quota). Auto Scaling retries every few seconds and each attempt is one event.

Example (shape from "Amazon EC2 Auto Scaling event reference", EC2 Auto Scaling User Guide; fixture of record
``tests/events/autoscaling-launch-unsuccessful.json``)::

    {
        "version": "0",
        "id": "3f0a4c1e-7b2d-4e8f-9a6c-1d2e3f4a5b01",
        "detail-type": "EC2 Instance Launch Unsuccessful",
        "source": "aws.autoscaling",
        "account": "123456789012",
        "time": "2024-03-05T10:15:30Z",
        "region": "us-east-1",
        "resources": [
            "arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:...:autoScalingGroupName/nodes-us-east-1a..."
        ],
        "detail": {
            "StatusCode": "Failed",
            "AutoScalingGroupName": "nodes-us-east-1a.demo.k8s.local",
            "ActivityId": "...", "RequestId": "...",
            "Details": {"Availability Zone": "us-east-1a", "Subnet ID": "subnet-0123abcd"},
            "StatusMessage": "There is no Spot capacity available that matches your request.",
            "StartTime": "2024-03-05T10:15:29.113Z", "EndTime": "2024-03-05T10:15:30.002Z",
            "EC2InstanceId": "",
            "Cause": "At 2024-03-05T10:15:28Z an instance was started in response to a difference between desired
                      and actual capacity, increasing the capacity from 2 to 3.",
            "Origin": "EC2", "Destination": "AutoScalingGroup"
        }
    }

``LaunchDetail`` is also the ``detail`` of "EC2 Instance Launch Successful" (``launch_successful``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from core.model import INSTANCE_ID_RE
from lambdas.events.base import AwsEventModel
from lambdas.events.event import Event, EventKind

SOURCE = "aws.autoscaling"
DETAIL_TYPE = "EC2 Instance Launch Unsuccessful"


class LaunchDetail(BaseModel):
    """``detail`` of both launch events (only what is read is required: the group name)."""

    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="ignore")

    status_code: str = Field(default="", alias="StatusCode")
    asg_name: str = Field(alias="AutoScalingGroupName", min_length=1, max_length=255)
    instance_id: str = Field(default="", alias="EC2InstanceId")
    status_message: str = Field(default="", alias="StatusMessage")
    cause: str = Field(default="", alias="Cause")
    details: dict[str, Any] = Field(default_factory=dict, alias="Details")

    @field_validator("instance_id")
    @classmethod
    def _instance_id(cls, value: str | None) -> str:
        # a failed Spot launch names no instance (empty or absent); anything else must be an instance id
        value = value or ""
        if value and not INSTANCE_ID_RE.fullmatch(value):
            raise ValueError(f"not an EC2 instance id: {value!r}")
        return value


class LaunchUnsuccessful(AwsEventModel):
    """The whole event (EventBridge envelope with a typed ``detail``)."""

    detail: LaunchDetail


def launch_event(event: AwsEventModel, detail: LaunchDetail, kind: EventKind) -> Event:
    """A launch event (either outcome) as an ``Event`` of ``kind``."""
    return Event(
        kind=kind,
        event_id=event.id,
        event_time=event.time,
        asg_name=detail.asg_name,
        instance_id=detail.instance_id or None,
        status_message=detail.status_message,
        source=event.source,
        detail_type=event.detail_type,
        region=event.region,
        account=event.account,
    )


def to_event(event: LaunchUnsuccessful) -> Event:
    """The failure as an ``Event`` of kind ``launch_failed``."""
    return launch_event(event, event.detail, EventKind.LAUNCH_FAILED)
