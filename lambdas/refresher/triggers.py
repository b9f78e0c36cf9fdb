"""What invoked the refresher, as one internal type: ``Trigger``. Pure: no I/O.

| input                                                            | kind            |
|------------------------------------------------------------------|-----------------|
| ``{"trigger": "schedule"}`` (the weekly rule's target input)      | ``schedule``    |
| ``{"trigger": "tick"}`` (the tick rule's target input), or any    | ``tick``        |
|   EventBridge ``Scheduled Event`` (source ``aws.events``)         |                 |
| ``{"action": "refresh" | "status" | "cancel", ...}`` (manual)     | ``request``     |
| ``Node Drain Succeeded|Failed|Skipped`` (``node-manager.agent``)  | ``agent_result``|
| ``EC2 Instance Launch Successful`` (source ``aws.autoscaling``)   | ``launch``      |

A tick never starts a run; it only advances the active one (and frees a lock a crashed start left behind).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from aws_lambda_powertools.utilities.parser import parse
from pydantic import ValidationError

from core.exceptions import MalformedEventError, UnsupportedEventError
from lambdas.events import agent_result, autoscaling
from lambdas.refresher.request import Request, parse_request

SCHEDULE_SOURCE = autoscaling.SCHEDULE_SOURCE
SCHEDULED_EVENT = autoscaling.SCHEDULED_EVENT


class TriggerKind(str, Enum):
    SCHEDULE = "schedule"
    TICK = "tick"
    REQUEST = "request"
    AGENT_RESULT = "agent_result"
    LAUNCH = "launch"


@dataclass(frozen=True)
class Trigger:
    """One invocation's cause.

    Attributes:
        kind: see the module docstring.
        event_id: the EventBridge event id ("" for manual requests and target inputs).
        request: the validated manual request (kind ``request``).
        cluster: the cluster an agent result names (foreign ones are acknowledged).
        command_id, instance_id, asg_name: what an agent result or a launch names.
    """

    kind: TriggerKind
    event_id: str = ""
    request: Request | None = None
    cluster: str | None = None
    command_id: str | None = None
    instance_id: str | None = None
    asg_name: str | None = None

    def describe(self) -> str:
        if self.kind is TriggerKind.AGENT_RESULT:
            return f"agent result for command {self.command_id}"
        if self.kind is TriggerKind.LAUNCH:
            return f"launch of {self.instance_id} in {self.asg_name}"
        if self.kind is TriggerKind.REQUEST and self.request is not None:
            return f"{self.request.action} request"
        return self.kind.value


def _describe(err: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'event'}: {e['msg']}" for e in err.errors()[:5])


def parse_trigger(event: Any) -> Trigger:
    """Read one invocation's input.

    Raises:
        InvalidRequestError: a manual request that does not validate (``errors`` lists the fields).
        UnsupportedEventError: an EventBridge event of a (source, detail-type) the refresher does not handle.
        MalformedEventError: an event of a handled kind without the documented shape, or not an object.
    """
    if not isinstance(event, Mapping):
        raise MalformedEventError(f"input is not a JSON object but {type(event).__name__}")
    if "source" not in event:
        marker = event.get("trigger")
        if marker is not None and set(event) != {"trigger"}:
            # The rules send exactly {"trigger": ...}; anything beside it is a hand-made payload gone wrong
            # (e.g. {"trigger": "schedule", "dry_run": true} would otherwise start a real run).
            extra = sorted(str(k) for k in event if k != "trigger")
            raise MalformedEventError(f"unexpected keys beside 'trigger': {', '.join(extra)[:200]}")
        if marker == "schedule":
            return Trigger(TriggerKind.SCHEDULE)
        if marker == "tick":
            return Trigger(TriggerKind.TICK)
        if marker is not None:
            raise MalformedEventError(f"unknown trigger {marker!r} (expected 'schedule' or 'tick')")
        return Trigger(TriggerKind.REQUEST, request=parse_request(dict(event)))
    source, detail_type = event.get("source"), event.get("detail-type")
    try:
        if source == SCHEDULE_SOURCE and detail_type == SCHEDULED_EVENT:
            return Trigger(TriggerKind.TICK, event_id=str(event.get("id", "")))
        if source == agent_result.SOURCE and detail_type in agent_result.DRAIN_DETAIL_TYPES:
            parsed = parse(event=dict(event), model=agent_result.DrainResult)
            return Trigger(
                TriggerKind.AGENT_RESULT,
                event_id=parsed.id,
                cluster=parsed.detail.cluster,
                command_id=parsed.detail.command_id,
                instance_id=parsed.detail.instance_id,
            )
        if source == autoscaling.SOURCE and detail_type == autoscaling.LAUNCH_SUCCESSFUL:
            launched = parse(event=dict(event), model=autoscaling.LaunchSuccessful)
            return Trigger(
                TriggerKind.LAUNCH,
                event_id=launched.id,
                instance_id=launched.detail.instance_id or None,
                asg_name=launched.detail.asg_name,
            )
    except ValidationError as err:
        raise MalformedEventError(f"{detail_type} event id={event.get('id')!r}: {_describe(err)}") from err
    raise UnsupportedEventError(f"unsupported event source={source!r} detail-type={detail_type!r}")
