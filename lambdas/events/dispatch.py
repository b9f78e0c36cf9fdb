"""The one dispatch table: (source, detail-type) -> how to read that input into an ``Event``.

``parse_event`` is the only entry point; each Lambda calls it with the kinds it accepts. It does no I/O.

A direct invocation (a JSON object without ``source``: a rule's constant input or a manual request, see
``request``) has no (source, detail-type); it is filed under the pseudo key ``DIRECT``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from aws_lambda_powertools.utilities.parser import parse
from aws_lambda_powertools.utilities.parser.exceptions import InvalidModelTypeError
from pydantic import BaseModel, ValidationError

from core.exceptions import MalformedEventError, UnsupportedEventError
from lambdas.events import (
    agent_result,
    launch_successful,
    launch_unsuccessful,
    lifecycle,
    node_ready,
    rebalance,
    request,
    scheduled,
    spot,
    state_change,
)
from lambdas.events.event import Event, EventKind

M = TypeVar("M", bound=BaseModel)

DIRECT = ("", "")  # the key of a direct invocation (no EventBridge envelope)


@dataclass(frozen=True)
class Reader:
    """How to read one (source, detail-type): the kinds it can produce and the function that reads it.

    ``read(raw, received_at)`` returns the ``Event`` or raises ``MalformedEventError`` (or
    ``InvalidRequestError`` for a manual request).
    """

    kinds: frozenset[EventKind]
    read: Callable[[Mapping[str, Any], datetime], Event]


def _describe(err: ValidationError) -> str:
    """The validation errors in one line: ``detail.instance-id: String should match pattern ...; ...``."""
    parts = []
    for error in err.errors()[:5]:
        where = ".".join(str(p) for p in error["loc"]) or "event"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)


def _aws(kind: EventKind, model: type[M], convert: Callable[[M], Event]) -> Reader:
    """A reader of an EventBridge event: Powertools Parser ``model``, then ``convert``."""

    def read(raw: Mapping[str, Any], received_at: datetime) -> Event:
        where = f"{raw.get('detail-type')} event id={raw.get('id')!r}"
        try:
            return convert(parse(event=dict(raw), model=model))
        except ValidationError as err:
            raise MalformedEventError(f"{where}: {_describe(err)}") from err
        except InvalidModelTypeError as err:
            raise MalformedEventError(f"{where}: {err}") from err

    return Reader(frozenset({kind}), read)


def _read_direct(raw: Mapping[str, Any], received_at: datetime) -> Event:
    """A rule's constant input or a manual request, stamped ``received_at``."""
    got = request.read_direct(raw)
    if got is request.Marker.SCHEDULE:
        return Event(kind=EventKind.SCHEDULE, event_time=received_at)
    if got is request.Marker.TICK:
        return Event(kind=EventKind.TICK, event_time=received_at)
    return Event(kind=EventKind.REQUEST, event_time=received_at, request=got)


DISPATCH: Mapping[tuple[str, str], Reader] = {
    (spot.SOURCE, spot.DETAIL_TYPE): _aws(EventKind.SPOT_INTERRUPTION, spot.SpotInterruptionWarning, spot.to_event),
    (rebalance.SOURCE, rebalance.DETAIL_TYPE): _aws(
        EventKind.REBALANCE_RECOMMENDATION, rebalance.RebalanceRecommendation, rebalance.to_event
    ),
    (lifecycle.SOURCE, lifecycle.DETAIL_TYPE): _aws(
        EventKind.TERMINATE_LIFECYCLE_ACTION, lifecycle.TerminateLifecycleAction, lifecycle.to_event
    ),
    (state_change.SOURCE, state_change.DETAIL_TYPE): _aws(
        EventKind.INSTANCE_STATE_CHANGE, state_change.InstanceStateChange, state_change.to_event
    ),
    (launch_unsuccessful.SOURCE, launch_unsuccessful.DETAIL_TYPE): _aws(
        EventKind.LAUNCH_FAILED, launch_unsuccessful.LaunchUnsuccessful, launch_unsuccessful.to_event
    ),
    (launch_successful.SOURCE, launch_successful.DETAIL_TYPE): _aws(
        EventKind.LAUNCH_SUCCEEDED, launch_successful.LaunchSuccessful, launch_successful.to_event
    ),
    (scheduled.SOURCE, scheduled.DETAIL_TYPE): _aws(EventKind.TICK, scheduled.ScheduledEvent, scheduled.to_event),
    **{
        (agent_result.SOURCE, detail_type): _aws(
            EventKind.DRAIN_FINISHED, agent_result.DrainResult, agent_result.to_event
        )
        for detail_type in (*agent_result.DRAIN_DETAIL_TYPES, *agent_result.CORDON_DETAIL_TYPES)
    },
    (node_ready.SOURCE, node_ready.DETAIL_TYPE): _aws(EventKind.NODE_READY, node_ready.NodeReady, node_ready.to_event),
    DIRECT: Reader(frozenset({EventKind.SCHEDULE, EventKind.TICK, EventKind.REQUEST}), _read_direct),
}


def parse_event(raw: Any, kinds: Collection[EventKind], received_at: datetime) -> Event:
    """Parse one Lambda input (the decoded JSON ``event`` argument) into an ``Event`` of one of ``kinds``.

    Args:
        raw: the decoded JSON input.
        kinds: the kinds the calling Lambda accepts; any other is unsupported.
        received_at: when it was received (UTC); the time of inputs that carry none.

    Returns:
        The event.

    Raises:
        UnsupportedEventError: the (source, detail-type) pair is not in ``DISPATCH`` or may yield a kind not in
            ``kinds`` (e.g. an EC2 state-change notification reaching a Lambda through a too-wide rule).
        MalformedEventError: the input does not have the documented shape (not an object, a ``source`` or
            ``detail-type`` that is not a string, no ``id``, no ``detail``, a ``time`` that is not an RFC 3339
            string, an instance id that is not ``i-`` + 8 to 17 hex digits, an unknown ``instance-action``,
            a launch event without ``AutoScalingGroupName``, an agent result without
            ``command_id``, a "Node Ready" without ``cluster``, with no node, more than 50 or a bad instance id, a
            ``trigger`` input with other keys). The message names the fields at fault.
        InvalidRequestError: a manual request that does not validate (``errors`` lists the fields).

    >>> from datetime import UTC
    >>> event = parse_event({"version": "0", "id": "1", "detail-type": "EC2 Instance Rebalance Recommendation",
    ...     "source": "aws.ec2", "account": "1", "time": "2024-01-01T00:00:00Z", "region": "us-east-1",
    ...     "resources": [], "detail": {"instance-id": "i-0123456789abcdef0"}},
    ...     {EventKind.REBALANCE_RECOMMENDATION}, datetime(2024, 1, 1, tzinfo=UTC))
    >>> event.kind.value, event.instance_id
    ('rebalance_recommendation', 'i-0123456789abcdef0')
    """
    if not isinstance(raw, Mapping):
        raise MalformedEventError(f"event is not a JSON object but {type(raw).__name__}")
    source, detail_type = raw.get("source"), raw.get("detail-type")
    if "source" in raw:
        _check_envelope_key(raw)
    key: tuple[Any, Any] = (source, detail_type) if "source" in raw else DIRECT
    reader = DISPATCH.get(key)
    if reader is None or not reader.kinds <= set(kinds):
        handled = ", ".join(f"{s}/{d}" if (s, d) != DIRECT else "direct invocation" for s, d in _keys(kinds))
        raise UnsupportedEventError(
            f"unsupported event source={source!r} detail-type={detail_type!r} (id={raw.get('id')!r}); "
            f"handled: {handled}"
        )
    return reader.read(raw, received_at)


def _check_envelope_key(raw: Mapping[str, Any]) -> None:
    """An EventBridge envelope's ``source`` and ``detail-type`` are strings ("Amazon EventBridge events",
    EventBridge User Guide); anything else (a list, an object, a number, null, missing) is malformed, never
    looked up (a list is not even hashable).

    Raises:
        MalformedEventError: naming the field and the JSON type found.
    """
    for field in ("source", "detail-type"):
        value = raw.get(field)
        if not isinstance(value, str):
            found = "none" if field not in raw else _json_type(value)
            raise MalformedEventError(f"event {field} must be a string, found {found} (id={raw.get('id')!r})")


def _json_type(value: Any) -> str:
    """The JSON type of a decoded value, with its article, for error messages (``an array``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "an array"
    return f"a {type(value).__name__}"


def _keys(kinds: Collection[EventKind]) -> list[tuple[str, str]]:
    """The keys of ``DISPATCH`` whose reader yields only ``kinds``."""
    return [key for key, reader in DISPATCH.items() if reader.kinds <= set(kinds)]
