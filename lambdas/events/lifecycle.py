"""EC2 Instance-terminate Lifecycle Action: Auto Scaling is about to terminate an instance and waits (state
``Terminating:Wait``) on a termination lifecycle hook until CompleteLifecycleAction or the hook's heartbeat timeout.

It fires for every termination of a group that has such a hook: a scale-in by an operator, AZ rebalancing, an
instance refresh, an unhealthy instance replaced, and our own refresher's terminations. The stack adds the hook
``node-manager-drain`` to the managed groups (infra/lifecycle.py) and a rule for this event.

Example (shape from "Amazon EC2 Auto Scaling event reference", EC2 Auto Scaling User Guide; fixture of record
``tests/events/lifecycle-terminate-action.json``)::

    {
        "version": "0",
        "id": "468fbd29-4a04-4c37-8f2e-3f1e1b0c5d21",
        "detail-type": "EC2 Instance-terminate Lifecycle Action",
        "source": "aws.autoscaling",
        "account": "123456789012",
        "time": "2024-03-05T10:15:30Z",
        "region": "us-east-1",
        "resources": [
            "arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:...:autoScalingGroupName/nodes-us-east-1a..."
        ],
        "detail": {
            "LifecycleActionToken": "87654321-4321-4321-4321-210987654321",
            "AutoScalingGroupName": "nodes-us-east-1a.demo.k8s.local",
            "LifecycleHookName": "node-manager-drain",
            "EC2InstanceId": "i-0a1b2c3d4e5f60718",
            "LifecycleTransition": "autoscaling:EC2_INSTANCE_TERMINATING",
            "NotificationMetadata": "",
            "Origin": "AutoScalingGroup",
            "Destination": "EC2"
        }
    }
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from core.lifecycle import LifecycleAction
from core.model import INSTANCE_ID_RE
from lambdas.events.base import AwsEventModel
from lambdas.events.event import Event, EventKind

SOURCE = "aws.autoscaling"
DETAIL_TYPE = "EC2 Instance-terminate Lifecycle Action"
TERMINATING = "autoscaling:EC2_INSTANCE_TERMINATING"


class TerminateLifecycleDetail(BaseModel):
    """``detail`` of the event (the fields read; others ignored)."""

    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="ignore")

    token: str = Field(alias="LifecycleActionToken", min_length=1, max_length=36 * 2)
    asg_name: str = Field(alias="AutoScalingGroupName", min_length=1, max_length=255)
    hook_name: str = Field(alias="LifecycleHookName", min_length=1, max_length=255)
    instance_id: str = Field(alias="EC2InstanceId", pattern=INSTANCE_ID_RE.pattern)
    transition: Literal["autoscaling:EC2_INSTANCE_TERMINATING"] = Field(alias="LifecycleTransition")


class TerminateLifecycleAction(AwsEventModel):
    """The whole event (EventBridge envelope with a typed ``detail``)."""

    detail: TerminateLifecycleDetail


def to_event(event: TerminateLifecycleAction) -> Event:
    """The event as an ``Event`` of kind ``terminate_lifecycle_action`` carrying the action."""
    return Event(
        kind=EventKind.TERMINATE_LIFECYCLE_ACTION,
        event_id=event.id,
        event_time=event.time,
        instance_id=event.detail.instance_id,
        lifecycle=LifecycleAction(
            instance_id=event.detail.instance_id,
            asg_name=event.detail.asg_name,
            hook_name=event.detail.hook_name,
            token=event.detail.token,
            event_id=event.id,
        ),
        source=event.source,
        detail_type=event.detail_type,
        region=event.region,
        account=event.account,
    )
