"""EC2 Instance Rebalance Recommendation: a Spot instance is at elevated risk of interruption.

Example (shape from "EC2 instance rebalance recommendations", Amazon EC2 User Guide; the fixture of record is
``tests/events/rebalance-recommendation.json``)::

    {
        "version": "0",
        "id": "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c04",
        "detail-type": "EC2 Instance Rebalance Recommendation",
        "source": "aws.ec2",
        "account": "123456789012",
        "time": "2024-03-05T10:05:00Z",
        "region": "us-east-1",
        "resources": ["arn:aws:ec2:us-east-1:123456789012:instance/i-0a1b2c3d4e5f60718"],
        "detail": {"instance-id": "i-0a1b2c3d4e5f60718"}
    }

The signal may come long before an interruption, together with it, or with none following at all.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from core.model import INSTANCE_ID_RE
from lambdas.events.base import AwsEventModel
from lambdas.events.event import Event, EventKind

SOURCE = "aws.ec2"
DETAIL_TYPE = "EC2 Instance Rebalance Recommendation"


class RebalanceDetail(BaseModel):
    """``detail`` of the recommendation: ``{"instance-id": "i-..."}``."""

    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="ignore")

    instance_id: str = Field(alias="instance-id", pattern=INSTANCE_ID_RE.pattern)


class RebalanceRecommendation(AwsEventModel):
    """The whole event (EventBridge envelope with a typed ``detail``)."""

    detail: RebalanceDetail


def to_event(event: RebalanceRecommendation) -> Event:
    """The recommendation as an ``Event`` of kind ``rebalance_recommendation``."""
    return Event(
        kind=EventKind.REBALANCE_RECOMMENDATION,
        event_id=event.id,
        event_time=event.time,
        instance_id=event.detail.instance_id,
        source=event.source,
        detail_type=event.detail_type,
        region=event.region,
        account=event.account,
    )
