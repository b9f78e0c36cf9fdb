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
from lambdas.events import rebalance, spot
from lambdas.events.notice import InterruptionNotice


@dataclass(frozen=True)
class EventKind:
    """How to read one kind of event: its Powertools Parser model and its converter."""

    model: type[BaseModel]
    convert: Callable[[Any], InterruptionNotice]


DISPATCH: Mapping[tuple[str, str], EventKind] = {
    (spot.SOURCE, spot.DETAIL_TYPE): EventKind(spot.SpotInterruptionWarning, spot.to_notice),
    (rebalance.SOURCE, rebalance.DETAIL_TYPE): EventKind(rebalance.RebalanceRecommendation, rebalance.to_notice),
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
    if not isinstance(event, Mapping):
        raise MalformedEventError(f"event is not a JSON object but {type(event).__name__}")
    key = (event.get("source"), event.get("detail-type"))
    kind = DISPATCH.get(key)  # type: ignore[arg-type]
    if kind is None:
        handled = ", ".join(f"{s}/{d}" for s, d in DISPATCH)
        raise UnsupportedEventError(
            f"unsupported event source={key[0]!r} detail-type={key[1]!r} (id={event.get('id')!r}); "
            f"handled: {handled}"
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
