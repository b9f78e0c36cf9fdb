"""EC2 Instance Launch Successful: an Auto Scaling group launched an instance. The replenisher reads it to follow a
group's recovery; the refresher to move a step on as soon as its spare exists.

Example (shape from "Amazon EC2 Auto Scaling event reference", EC2 Auto Scaling User Guide; fixture of record
``tests/events/autoscaling-launch-successful.json``)::

    {
        "version": "0",
        "id": "6c2d8e4f-1a3b-4c5d-9e7f-2a4b6c8d0e12",
        "detail-type": "EC2 Instance Launch Successful",
        "source": "aws.autoscaling",
        "account": "123456789012",
        "time": "2024-03-05T10:42:11Z",
        "region": "us-east-1",
        "resources": [
            "arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:...:autoScalingGroupName/nodes-us-east-1a...",
            "arn:aws:ec2:us-east-1:123456789012:instance/i-0b1c2d3e4f5a60719"
        ],
        "detail": {
            "StatusCode": "InProgress",
            "AutoScalingGroupName": "nodes-us-east-1a.demo.k8s.local",
            "ActivityId": "...", "RequestId": "...",
            "Details": {"Availability Zone": "us-east-1a", "Subnet ID": "subnet-0123abcd4567ef890"},
            "StartTime": "2024-03-05T10:41:37.671Z", "EndTime": "2024-03-05T10:42:11.208Z",
            "EC2InstanceId": "i-0b1c2d3e4f5a60719",
            "Cause": "At 2024-03-05T10:41:34Z an instance was started in response to a difference between desired
                      and actual capacity, increasing the capacity from 2 to 3.",
            "Origin": "EC2", "Destination": "AutoScalingGroup"
        }
    }

The ``detail`` is Launch Unsuccessful's (``launch_unsuccessful.LaunchDetail``) without ``StatusMessage``.
"""

from __future__ import annotations

from lambdas.events.base import AwsEventModel
from lambdas.events.event import Event, EventKind
from lambdas.events.launch_unsuccessful import LaunchDetail, launch_event

SOURCE = "aws.autoscaling"
DETAIL_TYPE = "EC2 Instance Launch Successful"


class LaunchSuccessful(AwsEventModel):
    """The whole event (EventBridge envelope with a typed ``detail``)."""

    detail: LaunchDetail


def to_event(event: LaunchSuccessful) -> Event:
    """The launch as an ``Event`` of kind ``launch_succeeded`` (``instance_id`` the new instance, None if empty)."""
    return launch_event(event, event.detail, EventKind.LAUNCH_SUCCEEDED)
