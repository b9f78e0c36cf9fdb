"""The internal event type of the three Lambdas: ``Event``, whose ``kind`` is an ``EventKind``.

Every supported input (an EventBridge event, a rule's constant input, a manual request) is converted into one
``Event`` by its module's converter (``lambdas.events.dispatch`` picks the module by (source, detail-type)), so no
decider ever sees an AWS payload. Which fields are set depends on the kind; the table says which (every event has
``kind``, ``event_id``, ``event_time``, ``source`` and ``detail_type``):

| kind                         | read from (detail-type, or the direct input)  | fields set                       |
|------------------------------|-----------------------------------------------|----------------------------------|
| ``spot_interruption``        | EC2 Spot Instance Interruption Warning        | instance_id, instance_action     |
| ``rebalance_recommendation`` | EC2 Instance Rebalance Recommendation         | instance_id                      |
| ``terminate_lifecycle_action``| EC2 Instance-terminate Lifecycle Action      | instance_id, lifecycle           |
| ``instance_state_change``    | EC2 Instance State-change Notification        | instance_id, instance_state      |
| ``launch_failed``            | EC2 Instance Launch Unsuccessful              | asg_name, status_message         |
| ``launch_succeeded``         | EC2 Instance Launch Successful                | asg_name, instance_id (or None)  |
| ``tick``                     | Scheduled Event, ``{"trigger": "tick"}``      | --                               |
| ``drain_finished``           | Node Drain Succeeded / Failed / Skipped       | command_id, cluster, instance_id |
| ``node_ready``               | Node Ready (the agent's)                      | cluster, instance_ids, asg_names |
| ``schedule``                 | ``{"trigger": "schedule"}``                   | --                               |
| ``request``                  | a manual ``{"action": ...}`` invocation       | request                          |
"""

from __future__ import annotations

from datetime import datetime
from enum import Enum

from pydantic import BaseModel, ConfigDict, Field, field_validator

from core.exceptions import EventTimeInFutureError, MalformedEventError
from core.lifecycle import LifecycleAction
from core.model import INSTANCE_ID_RE, as_utc
from lambdas.events.request import CancelRequest, RefreshRequest, StatusRequest


class EventKind(str, Enum):
    """What happened (the closed set of inputs the Lambdas act on)."""

    SPOT_INTERRUPTION = "spot_interruption"  # "EC2 Spot Instance Interruption Warning": 2 minutes' notice
    REBALANCE_RECOMMENDATION = "rebalance_recommendation"  # "EC2 Instance Rebalance Recommendation": elevated risk
    TERMINATE_LIFECYCLE_ACTION = "terminate_lifecycle_action"  # "EC2 Instance-terminate Lifecycle Action" (hook)
    INSTANCE_STATE_CHANGE = "instance_state_change"  # "EC2 Instance State-change Notification"
    LAUNCH_FAILED = "launch_failed"  # "EC2 Instance Launch Unsuccessful" (aws.autoscaling)
    LAUNCH_SUCCEEDED = "launch_succeeded"  # "EC2 Instance Launch Successful" (aws.autoscaling)
    TICK = "tick"  # "Scheduled Event" (aws.events) or {"trigger": "tick"}: the periodic safety net
    DRAIN_FINISHED = "drain_finished"  # "Node Drain Succeeded/Failed/Skipped" (node-manager.agent)
    NODE_READY = "node_ready"  # "Node Ready" (node-manager.agent): nodes that became Ready, a hint to read again
    SCHEDULE = "schedule"  # {"trigger": "schedule"}: the refresh schedule's constant input
    REQUEST = "request"  # a manual invocation {"action": "refresh" | "status" | "cancel", ...}


class InstanceAction(str, Enum):
    """What EC2 will do to an interrupted Spot instance (the warning's ``detail.instance-action``).

    Source: "Spot Instance interruption notices", Amazon EC2 User Guide: ``hibernate``, ``stop`` or ``terminate``.
    Only ``terminate`` means the instance never comes back.
    """

    TERMINATE = "terminate"
    STOP = "stop"
    HIBERNATE = "hibernate"


class Event(BaseModel):
    """One input to one Lambda, whatever its source (see the module docstring for which fields each kind sets).

    Attributes:
        kind: see ``EventKind``.
        event_id: the EventBridge event ``id`` (a UUID); command ids and idempotency keys derive from it. ""
            for inputs that are not EventBridge events (a rule's constant input, a manual request).
        event_time: the event's ``time`` (UTC); the Spot deadline counts from it. For inputs without a time, when
            they were received.
        instance_id: the EC2 instance concerned (``detail.instance-id``, ``EC2InstanceId``, the agent's
            ``instance_id``); None when the event names none (a failed Spot launch creates no instance).
        instance_action: for a Spot warning, what EC2 will do.
        lifecycle: for a terminate lifecycle action, the action (hook, group, token).
        instance_state: for a state-change notification, the new state.
        asg_name: the Auto Scaling group (launch events).
        status_message: Launch Unsuccessful's ``StatusMessage`` (why), for logs.
        command_id, cluster: agent results only (``cluster`` also for ``node_ready``).
        instance_ids, asg_names: ``node_ready`` only: the nodes' instances and, index for index, their groups as the
            agent saw them ("" when it could not tell).
        request: the validated manual request (kind ``request``).
        source, detail_type, region, account: copied from the envelope ("" for direct inputs); ``region`` and
            ``account`` decide whether the event is the deployment's (``lambdas.events.scope``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: EventKind
    event_id: str = Field(default="", max_length=128)
    event_time: datetime
    instance_id: str | None = None
    instance_action: InstanceAction | None = None
    lifecycle: LifecycleAction | None = None
    instance_state: str | None = None
    asg_name: str | None = None
    status_message: str = ""
    command_id: str | None = None
    cluster: str | None = None
    instance_ids: tuple[str, ...] = ()
    asg_names: tuple[str, ...] = ()
    request: RefreshRequest | StatusRequest | CancelRequest | None = None
    source: str = ""
    detail_type: str = ""
    region: str = ""
    account: str = ""

    @field_validator("instance_id")
    @classmethod
    def _instance_id(cls, value: str | None) -> str | None:
        if value is not None and not INSTANCE_ID_RE.fullmatch(value):
            raise ValueError(f"not an EC2 instance id: {value!r}")
        return value

    @field_validator("instance_ids")
    @classmethod
    def _instance_ids(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [v for v in value if not INSTANCE_ID_RE.fullmatch(v)]
        if bad:
            raise ValueError(f"not EC2 instance ids: {bad[:3]!r}")
        return value

    @field_validator("event_time")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        # EventBridge writes "yyyy-mm-ddThh:mm:ssZ"; a time without zone is read as UTC rather than dropped.
        return as_utc(value)

    @property
    def instance(self) -> str:
        """The instance the event is about, for the kinds that always name one (the interruption Lambda's).

        Raises:
            MalformedEventError: the event names no instance.
        """
        if self.instance_id is None:
            raise MalformedEventError(f"{self.detail_type or self.kind.value} event {self.event_id} names no instance")
        return self.instance_id

    def describe(self) -> str:
        """A few words for logs: ``agent result for command <id>``, ``launch of <i-...> in <asg>``, ``refresh
        request``, else the kind."""
        if self.kind is EventKind.DRAIN_FINISHED:
            return f"agent result for command {self.command_id}"
        if self.kind is EventKind.NODE_READY:
            return f"{len(self.instance_ids)} node(s) Ready"
        if self.kind is EventKind.LAUNCH_SUCCEEDED:
            return f"launch of {self.instance_id} in {self.asg_name}"
        if self.kind is EventKind.REQUEST and self.request is not None:
            return f"{self.request.action} request"
        return str(self.kind.value)


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
