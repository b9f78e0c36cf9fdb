"""The handler prologue every Lambda runs: count the invocation, parse the input into an ``Event`` of the kinds the
Lambda accepts, refuse events stamped in the future, put the event's keys on the log lines, answer bad input, and
acknowledge events that are not the deployment's.

Bad input (malformed, unsupported, from the future, an invalid manual request) is logged, counted (the rejected
metric by ``reason``) and answered with ``{"status": "rejected", "reason": ..., "error": ...}``; it is *not* raised,
so nothing retries it. Duplicates are each Lambda's business (idempotency, or level-triggered decisions).

An event of another account or region (``lambdas.events.scope``) is well formed but not ours: it is logged, counted
(``EventsOutOfScope`` by ``reason``: ``foreign_account``, ``foreign_region``, ``account_unknown``,
``region_unknown``) and answered with ``{"status": "acknowledged", "reason": ..., "event_id", "kind", "detail"}``;
nothing else is read or done.

Usage::

    with invocation(logger, telemetry, "EventsReceived"):
        event = admit(raw, KINDS, now, logger, telemetry, "EventsRejected", scope=deps.scope)
        if not isinstance(event, Event):
            return event  # the rejection or the acknowledgement
        ...
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Protocol

from core.exceptions import BadInputError, InvalidRequestError
from lambdas.events.dispatch import parse_event
from lambdas.events.event import Event, EventKind, check_not_future
from lambdas.events.scope import OutOfScope, Scope, out_of_scope

LOG_KEYS = ("instance_id", "event_kind")  # appended to every log line of the invocation once the event is read
MAX_ERROR_CHARS = 2000
OUT_OF_SCOPE_METRIC = "EventsOutOfScope"  # by reason (``lambdas.events.scope.ScopeReason``), in every Lambda


class Counter(Protocol):
    """What the prologue needs of ``lambdas.common.telemetry.Telemetry``."""

    def count(self, name: str, value: int = 1) -> None: ...

    def count_by(self, name: str, dimension: str, value: str) -> None: ...

    def flush(self) -> None: ...


@contextmanager
def invocation(logger: Any, telemetry: Counter, received_metric: str) -> Iterator[None]:
    """Count the invocation (``received_metric``); at the end, whatever happened, drop the event's log keys and
    publish the invocation's metrics."""
    telemetry.count(received_metric)
    try:
        yield
    finally:
        logger.remove_keys(list(LOG_KEYS))
        telemetry.flush()


def admit(
    raw: Any,
    kinds: Collection[EventKind],
    now: datetime,
    logger: Any,
    telemetry: Counter,
    rejected_metric: str,
    *,
    scope: Scope,
    reject_future: bool = True,
) -> Event | dict[str, Any]:
    """Parse ``raw`` into an ``Event`` of ``kinds`` and set the log keys, or reject it, or acknowledge it when it
    is not the deployment's.

    Args:
        raw: the Lambda's ``event`` argument.
        kinds: the kinds the Lambda accepts.
        now: the current time (UTC): direct inputs are stamped with it; events more than the allowed clock skew
            after it are refused when ``reject_future``.
        logger: a Powertools ``Logger`` (correlation id = the event id, keys ``LOG_KEYS``).
        telemetry: counts rejections as ``rejected_metric`` by ``reason``, events of another scope as
            ``EventsOutOfScope`` by ``reason``.
        scope: the deployment's account and region; an event from the bus outside it is not returned.

    Returns:
        The event, or a response (a dict): the rejection when the input is bad, the acknowledgement when the event
        is another account's or region's (or the deployment's own are unknown).
    """
    try:
        event = parse_event(raw, kinds, now)
        if reject_future:
            check_not_future(event.event_time, now)
    except BadInputError as err:
        return rejected(err, logger, telemetry, rejected_metric)
    if event.event_id:
        logger.set_correlation_id(event.event_id)
    keys: dict[str, str] = {"event_kind": event.kind.value}
    if event.instance_id:
        keys["instance_id"] = event.instance_id
    logger.append_keys(**keys)
    foreign = out_of_scope(event, scope)
    if foreign is not None:
        return acknowledged_out_of_scope(event, foreign, logger, telemetry)
    return event


def acknowledged_out_of_scope(event: Event, foreign: OutOfScope, logger: Any, telemetry: Counter) -> dict[str, Any]:
    """Log and count (``EventsOutOfScope`` by ``reason``) an event that is not the deployment's.

    Returns:
        The response ``{"status": "acknowledged", "reason": ..., "event_id": ..., "kind": ..., "detail": ...}``.
    """
    unknown = foreign.reason.value.endswith("_unknown")
    # a deployment that does not know its own scope acts on nothing: an error an operator must see
    log = logger.error if unknown else logger.warning
    log(
        f"{event.detail_type} {event.event_id} not acted on ({foreign.reason.value}): {foreign.message}",
        extra={"reason": foreign.reason.value, "event_account": event.account, "event_region": event.region},
    )
    telemetry.count_by(OUT_OF_SCOPE_METRIC, "reason", foreign.reason.value)
    return {
        "status": "acknowledged",
        "reason": foreign.reason.value,
        "event_id": event.event_id,
        "kind": event.kind.value,
        "detail": foreign.message,
    }


def rejected(err: BadInputError, logger: Any, telemetry: Counter, metric: str) -> dict[str, Any]:
    """Log and count (``metric`` by ``reason``) an input that does not have the documented shape.

    Returns:
        The response ``{"status": "rejected", "reason": ..., "error": ...}`` (not raised: nothing retries it), with
        ``errors`` (one ``field: message`` each) for an invalid manual request.
    """
    if isinstance(err, InvalidRequestError):
        logger.warning(f"request rejected: {err}", extra={"reason": err.reason, "errors": err.errors})
        telemetry.count_by(metric, "reason", err.reason)
        return {"status": "rejected", "reason": err.reason, "error": str(err), "errors": err.errors}
    # The error quotes the input; an event may be 256 KB, more than a CloudWatch log event holds.
    message = str(err)
    if len(message) > MAX_ERROR_CHARS:
        message = f"{message[:MAX_ERROR_CHARS]}... ({len(message) - MAX_ERROR_CHARS} more characters)"
    logger.warning(f"event rejected ({err.reason}): {message}", extra={"reason": err.reason})
    telemetry.count_by(metric, "reason", err.reason)
    return {"status": "rejected", "reason": err.reason, "error": message}
