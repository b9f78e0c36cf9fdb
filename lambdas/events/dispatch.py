"""The dispatch table: (source, detail-type) -> the event's model and its converter to ``InterruptionNotice``.

``parse_notice`` is the only entry point; it does no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools.utilities.parser import parse
from aws_lambda_powertools.utilities.parser.exceptions import InvalidModelTypeError
from pydantic import BaseModel, ValidationError

from core.exceptions import MalformedEventError, UnsupportedEventError
from lambdas.events import agent_result, autoscaling, lifecycle, rebalance, spot, state_change
from lambdas.events.notice import CapacityNotice, InterruptionNotice


@dataclass(frozen=True)
class EventKind:
    """How to read one kind of event: its Powertools Parser model and its converter."""

    model: type[BaseModel]
    convert: Callable[[Any], Any]


DISPATCH: Mapping[tuple[str, str], EventKind] = {
    (spot.SOURCE, spot.DETAIL_TYPE): EventKind(spot.SpotInterruptionWarning, spot.to_notice),
    (rebalance.SOURCE, rebalance.DETAIL_TYPE): EventKind(rebalance.RebalanceRecommendation, rebalance.to_notice),
    (lifecycle.SOURCE, lifecycle.DETAIL_TYPE): EventKind(lifecycle.TerminateLifecycleAction, lifecycle.to_notice),
    (state_change.SOURCE, state_change.DETAIL_TYPE): EventKind(
        state_change.InstanceStateChange, state_change.to_notice
    ),
}

# The replenisher's events -> CapacityNotice.
CAPACITY_DISPATCH: Mapping[tuple[str, str], EventKind] = {
    (autoscaling.SOURCE, autoscaling.LAUNCH_UNSUCCESSFUL): EventKind(
        autoscaling.LaunchUnsuccessful, autoscaling.unsuccessful_to_notice
    ),
    (autoscaling.SOURCE, autoscaling.LAUNCH_SUCCESSFUL): EventKind(
        autoscaling.LaunchSuccessful, autoscaling.successful_to_notice
    ),
    (autoscaling.SCHEDULE_SOURCE, autoscaling.SCHEDULED_EVENT): EventKind(
        autoscaling.ScheduledEvent, autoscaling.tick_to_notice
    ),
    **{
        (agent_result.SOURCE, detail_type): EventKind(agent_result.DrainResult, agent_result.to_notice)
        for detail_type in agent_result.DRAIN_DETAIL_TYPES
    },
}


def _describe(err: ValidationError) -> str:
    """The validation errors in one line: ``detail.instance-id: String should match pattern ...; ...``."""
    parts = []
    for error in err.errors()[:5]:
        where = ".".join(str(p) for p in error["loc"]) or "event"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)


def parse_notice(event: Any) -> InterruptionNotice:
    """Parse a raw EventBridge event (the Lambda's ``event`` argument) into an ``InterruptionNotice``.

    Args:
        event: the decoded JSON event.

    Returns:
        The notice.

    Raises:
        UnsupportedEventError: the (source, detail-type) pair is not in ``DISPATCH`` (e.g. an EC2 state-change
            notification reaching this function through a too-wide rule).
        MalformedEventError: the event does not have the documented shape (not an object, no ``id``, no
            ``detail``, an instance id that is not ``i-`` + 8 to 17 hex digits, an unknown ``instance-action``,
            an unreadable ``time``). The message names the fields at fault.

    >>> notice = parse_notice({"version": "0", "id": "1", "detail-type": "EC2 Instance Rebalance Recommendation",
    ...     "source": "aws.ec2", "account": "1", "time": "2024-01-01T00:00:00Z", "region": "us-east-1",
    ...     "resources": [], "detail": {"instance-id": "i-0123456789abcdef0"}})
    >>> notice.kind.value, notice.instance_id
    ('rebalance_recommendation', 'i-0123456789abcdef0')
    """
    notice: InterruptionNotice = _parse(event, DISPATCH)
    return notice


def parse_capacity_notice(event: Any) -> CapacityNotice:
    """Parse a raw event for the replenisher (``CAPACITY_DISPATCH``) into a ``CapacityNotice``.

    Raises:
        UnsupportedEventError, MalformedEventError: as ``parse_notice`` (a launch event without
            ``AutoScalingGroupName``, an ``EC2InstanceId`` that is neither empty nor an instance id, an agent
            event without ``command_id`` or ``cluster``).
    """
    notice: CapacityNotice = _parse(event, CAPACITY_DISPATCH)
    return notice


def _parse(event: Any, table: Mapping[tuple[str, str], EventKind]) -> Any:
    if not isinstance(event, Mapping):
        raise MalformedEventError(f"event is not a JSON object but {type(event).__name__}")
    key = (event.get("source"), event.get("detail-type"))
    kind = table.get(key)  # type: ignore[arg-type]
    if kind is None:
        handled = ", ".join(f"{s}/{d}" for s, d in table)
        raise UnsupportedEventError(
            f"unsupported event source={key[0]!r} detail-type={key[1]!r} (id={event.get('id')!r}); handled: {handled}"
        )
    try:
        model = parse(event=dict(event), model=kind.model)
    except ValidationError as err:
        raise MalformedEventError(f"{key[1]} event id={event.get('id')!r}: {_describe(err)}") from err
    except InvalidModelTypeError as err:
        raise MalformedEventError(f"{key[1]} event id={event.get('id')!r}: {err}") from err
    try:
        return kind.convert(model)
    except ValidationError as err:
        raise MalformedEventError(f"{key[1]} event id={event.get('id')!r}: {_describe(err)}") from err
