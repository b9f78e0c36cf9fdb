"""Reporting a command's outcome: the ``CMD#`` item, a Kubernetes Event on the Node, an EventBridge event.

Order matters. The terminal write to the ``CMD#`` item comes first and is the record of truth (the Lambdas read
it). The notifications follow and never undo it: a failed Kubernetes Event or EventBridge ``PutEvents`` is logged,
nothing more. Once EventBridge accepted the event the item gets ``reported_at``; without it, a worker that meets
the command again (the consumer keeps the message when the event was not sent, and a crash between the two steps
leaves it too) sends the notifications again (see ``agent.consumer.decisions.on_refusal``).

EventBridge event (``PutEvents`` entry on ``EVENT_BUS_NAME``; shape from
https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-putevents.html)::

    Source      node-manager.agent
    DetailType  "Node Drain Succeeded" | "Node Drain Failed" | "Node Drain Skipped"
                "Node Cordon Succeeded" | "Node Cordon Failed" | "Node Cordon Skipped"
                "Node Uncordon Succeeded" | "Node Uncordon Failed" | "Node Uncordon Skipped"
                ("Failed" covers failed and timed_out; detail.status says which; "Skipped": no node for the
                instance)
    Detail      {"command_id": "spot-8f0c...", "cluster": "demo.k8s.local", "instance_id": "i-0abc...",
                 "node_name": "ip-10-0-1-17.ec2.internal", "kind": "drain", "status": "succeeded",
                 "reason": "spot interruption warning", "attempt": 1, "worker": "agent-7d9f:12",
                 "summary": {"message": "...", "evicted": 4, "remaining": 0, "errors": 0,
                             "duration_seconds": 12.3}}

The Kubernetes Event on the Node is posted by the drain engine for each result it returns
(``NodeCommandResult.event_posted``); this module posts one for outcomes decided without the engine (a drain whose
deadline passed before it started, an engine error) or whose Event the engine could not post.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from adapters.aws.events import EventBus
from adapters.dynamo.store import Store
from core.exceptions import AwsRequestError, AwsUnavailableError, StoreUnavailableError
from core.model import Command, CommandKind, CommandStatus, utcnow

log = logging.getLogger(__name__)

EVENT_SOURCE = "node-manager.agent"

_VERB = {CommandKind.DRAIN: "Drain", CommandKind.CORDON: "Cordon", CommandKind.UNCORDON: "Uncordon"}
_OUTCOME = {
    CommandStatus.SUCCEEDED: "Succeeded",
    CommandStatus.FAILED: "Failed",
    CommandStatus.TIMED_OUT: "Failed",
    CommandStatus.SKIPPED: "Skipped",
}


def detail_type(kind: CommandKind, status: CommandStatus) -> str:
    """The EventBridge detail-type of an outcome, e.g. ``Node Drain Succeeded``.

    Pure. Raises ``ValueError`` for a status that is not terminal (nothing is reported before the end).
    """
    if not status.terminal:
        raise ValueError(f"{status.value} is not a terminal status")
    return f"Node {_VERB[kind]} {_OUTCOME[status]}"


def summarize(result: Mapping[str, Any]) -> dict[str, Any]:
    """A small summary of a result (a ``NodeCommandResult`` dumped to JSON, or an outcome built by the consumer).

    Pure. Counts: ``evicted`` pods whose eviction (or deletion) was accepted (``evicted_at`` set) or that are gone,
    ``remaining`` pods still on the node at the end, ``errors``; ``duration_seconds`` from ``durations.total``.
    """
    pods = result.get("pods") or []
    durations = result.get("durations") or {}
    return {
        "message": str(result.get("message", "")),
        "evicted": sum(
            1 for pod in pods if pod.get("action") in ("evict", "delete") and (pod.get("evicted_at") or pod.get("gone"))
        ),
        "remaining": len(result.get("remaining") or []),
        "errors": len(result.get("errors") or []),
        "duration_seconds": durations.get("total"),
    }


def event_detail(
    command: Command, status: CommandStatus, result: Mapping[str, Any], attempt: int, worker: str
) -> dict[str, Any]:
    """The ``Detail`` of the EventBridge event for one outcome (shape in the module docstring). Pure."""
    return {
        "command_id": command.command_id,
        "cluster": command.cluster,
        "instance_id": command.instance_id,
        "node_name": result.get("node_name") or command.node_name,
        "kind": command.kind.value,
        "status": status.value,
        "reason": command.reason,
        "attempt": attempt,
        "worker": worker,
        "summary": summarize(result),
    }


class NodeEventPoster(Protocol):
    """Posts a Kubernetes Event about an outcome on its Node (wraps ``agent.events``); must not raise."""

    def __call__(self, node_name: str, kind: CommandKind, status: CommandStatus, message: str) -> None: ...


@dataclass(frozen=True)
class Outcome:
    """A command's end as the consumer saw it.

    Attributes:
        status: terminal status.
        result: JSON-able result stored in the ``CMD#`` item (``NodeCommandResult.model_dump(mode="json")`` or the
            consumer's own outcome of the same shape: ``message``, ``node_name``, ``errors`` ...).
        engine_posted_event: the drain engine already posted the Kubernetes Event for this result.
    """

    status: CommandStatus
    result: dict[str, Any]
    engine_posted_event: bool


class Reporter:
    """Writes the terminal status and sends the notifications.

    Args:
        store: the cluster's table access.
        events_client: an ``events`` (EventBridge) client (put through ``adapters.aws.events.EventBus``).
        event_bus_name: name or ARN of the bus (``EVENT_BUS_NAME``).
        post_node_event: posts a Kubernetes Event on a Node for outcomes the engine did not report; None to skip.
        finish_attempts: tries of the ``CMD#`` terminal write when DynamoDB throttles (``StoreUnavailableError``).
        sleep: injectable for tests.
    """

    def __init__(
        self,
        store: Store,
        events_client: Any,
        event_bus_name: str,
        post_node_event: NodeEventPoster | None = None,
        finish_attempts: int = 4,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.store = store
        self.bus = EventBus(events_client, event_bus_name)
        self.post_node_event = post_node_event
        self.finish_attempts = finish_attempts
        self.sleep = sleep

    def report(self, command: Command, worker: str, attempt: int, outcome: Outcome) -> bool:
        """Finish the command in its ``CMD#`` item, then notify (Kubernetes Event, EventBridge).

        Returns whether EventBridge accepted the event (see ``notify``).

        Raises:
            CommandTransitionError: this worker no longer owns the command (taken over or already terminal);
                nothing was notified.
            StoreUnavailableError: DynamoDB kept throttling over ``finish_attempts`` tries; nothing was notified
                (the message stays, so the command is retried by whoever receives it next).
        """
        self._finish(command.command_id, worker, attempt, outcome)
        return self.notify(
            command, outcome.status, outcome.result, attempt, worker, post_node_event=not outcome.engine_posted_event
        )

    def notify(
        self,
        command: Command,
        status: CommandStatus,
        result: Mapping[str, Any],
        attempt: int,
        worker: str,
        post_node_event: bool,
    ) -> bool:
        """Send the notifications of a finished command; once EventBridge accepted the event, mark the ``CMD#``
        item ``reported_at``.

        Returns whether EventBridge accepted the event. Never raises: each failure is logged.
        """
        node_name = result.get("node_name") or command.node_name
        if post_node_event and self.post_node_event is not None and node_name:
            self.post_node_event(str(node_name), command.kind, status, str(result.get("message", "")))
        if not self._put_event(command, status, result, attempt, worker):
            return False
        try:
            self.store.mark_reported(command.command_id, status, now=utcnow())
        except Exception:
            log.exception("could not mark command reported command_id=%s", command.command_id)
        return True

    def _finish(self, command_id: str, worker: str, attempt: int, outcome: Outcome) -> None:
        delay = 0.2
        for tries in range(1, self.finish_attempts + 1):
            try:
                self.store.finish_command(command_id, worker, attempt, outcome.status, outcome.result)
                return
            except StoreUnavailableError:
                if tries == self.finish_attempts:
                    raise
                log.warning("CMD# terminal write throttled, retrying command_id=%s try=%d", command_id, tries)
                self.sleep(delay)
                delay *= 2

    def _put_event(
        self, command: Command, status: CommandStatus, result: Mapping[str, Any], attempt: int, worker: str
    ) -> bool:
        kind = detail_type(command.kind, status)
        detail = json.dumps(event_detail(command, status, result, attempt, worker), default=str)
        try:
            rejection = self.bus.put(EVENT_SOURCE, kind, detail)
        except (AwsUnavailableError, AwsRequestError):
            log.exception("EventBridge put_events failed command_id=%s detail_type=%s", command.command_id, kind)
            return False
        if rejection is not None:
            log.error(
                "EventBridge rejected event command_id=%s detail_type=%s code=%s message=%s",
                command.command_id,
                kind,
                rejection.code,
                rejection.message,
            )
            return False
        log.info("event sent detail_type=%r command_id=%s status=%s", kind, command.command_id, status.value)
        return True
