"""The internal event type of the interruption Lambda: ``InterruptionNotice``.

Every supported AWS event is converted into one ``InterruptionNotice`` by its module's converter, so the decision
(``lambdas.interruption.decide``) never sees an AWS payload.
"""

from __future__ import annotations

from datetime import datetime
from enum import Enum

from pydantic import BaseModel, ConfigDict, Field, field_validator

from core.exceptions import EventTimeInFutureError
from core.lifecycle import LifecycleAction
from core.model import INSTANCE_ID_RE, as_utc


class NoticeKind(str, Enum):
    """Which warning the notice carries."""

    SPOT_INTERRUPTION = "spot_interruption"  # "EC2 Spot Instance Interruption Warning": 2 minutes' notice
    REBALANCE_RECOMMENDATION = "rebalance_recommendation"  # "EC2 Instance Rebalance Recommendation": elevated risk
    TERMINATE_LIFECYCLE_ACTION = "terminate_lifecycle_action"  # "EC2 Instance-terminate Lifecycle Action" (hook)
    INSTANCE_STATE_CHANGE = "instance_state_change"  # "EC2 Instance State-change Notification"


class InstanceAction(str, Enum):
    """What EC2 will do to an interrupted Spot instance (the warning's ``detail.instance-action``).

    Source: "Spot Instance interruption notices", Amazon EC2 User Guide: ``hibernate``, ``stop`` or ``terminate``.
    Only ``terminate`` means the instance never comes back.
    """

    TERMINATE = "terminate"
    STOP = "stop"
    HIBERNATE = "hibernate"


class InterruptionNotice(BaseModel):
    """One interruption-related warning about one instance.

    Attributes:
        kind: spot interruption or rebalance recommendation.
        event_id: the EventBridge event ``id`` (a UUID); command ids and idempotency keys derive from it.
        event_time: the event's ``time`` (UTC); the Spot deadline counts from it.
        instance_id: the EC2 instance concerned (``detail.instance-id``).
        instance_action: for a Spot warning, what EC2 will do; None for a rebalance recommendation.
        lifecycle: for a terminate lifecycle action, the action (hook, group, token); None otherwise.
        instance_state: for a state-change notification, the new state; None otherwise.
        source, detail_type, region, account: copied from the envelope, for logs.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: NoticeKind
    event_id: str = Field(min_length=1, max_length=128)
    event_time: datetime
    instance_id: str
    instance_action: InstanceAction | None = None
    lifecycle: LifecycleAction | None = None
    instance_state: str | None = None
    source: str
    detail_type: str
    region: str = ""
    account: str = ""

    @field_validator("instance_id")
    @classmethod
    def _instance_id(cls, value: str) -> str:
        if not INSTANCE_ID_RE.fullmatch(value):
            raise ValueError(f"not an EC2 instance id: {value!r}")
        return value

    @field_validator("event_time")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        # EventBridge writes "yyyy-mm-ddThh:mm:ssZ"; a time without zone is read as UTC rather than dropped.
        return as_utc(value)


class CapacityKind(str, Enum):
    """What woke the replenisher (its internal event kind)."""

    LAUNCH_FAILED = "launch_failed"  # "EC2 Instance Launch Unsuccessful" (aws.autoscaling)
    LAUNCH_SUCCEEDED = "launch_succeeded"  # "EC2 Instance Launch Successful" (aws.autoscaling)
    TICK = "tick"  # "Scheduled Event" (aws.events): the periodic safety net
    DRAIN_FINISHED = "drain_finished"  # "Node Drain Succeeded/Failed/Skipped" (node-manager.agent)


class CapacityNotice(BaseModel):
    """One event for the replenisher, whatever its source.

    Attributes:
        kind: see ``CapacityKind``.
        event_id, event_time: the envelope's ``id`` and ``time`` (UTC).
        asg_name: the Auto Scaling group (launch events), else None.
        instance_id: the instance launched (Launch Successful), or the drained one (agent events); None when the
            event names none (a failed Spot launch creates no instance).
        status_message: Launch Unsuccessful's ``StatusMessage`` (why), for logs.
        command_id, cluster: agent events only.
        source, detail_type: copied from the envelope, for logs.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: CapacityKind
    event_id: str = Field(min_length=1, max_length=128)
    event_time: datetime
    asg_name: str | None = None
    instance_id: str | None = None
    status_message: str = ""
    command_id: str | None = None
    cluster: str | None = None
    source: str
    detail_type: str

    @field_validator("event_time")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        return as_utc(value)


MAX_CLOCK_SKEW_SECONDS = 300  # EventBridge stamps events with the source's clock; allow that much ahead of ours


def check_not_future(event_time: datetime, now: datetime, skew_seconds: float = MAX_CLOCK_SKEW_SECONDS) -> None:
    """Refuse an event stamped more than ``skew_seconds`` after ``now`` (both UTC).

    Raises:
        EventTimeInFutureError: the event is from the future; it is rejected like a malformed one, never acted on.
    """
    if (event_time - now).total_seconds() > skew_seconds:
        raise EventTimeInFutureError(
            f"event time {event_time.isoformat()} is more than {skew_seconds:.0f} s after now ({now.isoformat()})",
            event_time,
        )
