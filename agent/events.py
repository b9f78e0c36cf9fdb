"""Kubernetes Events on the Node: what a cordon, drain or uncordon did, visible in ``kubectl describe node``.

``node_event`` (pure) builds a core/v1 Event
(https://kubernetes.io/docs/reference/kubernetes-api/cluster-resources/event-v1/) the way client-go's event recorder
does for a cluster-scoped object: in namespace ``default``, named ``<node>.<hex nanoseconds>``, ``involvedObject``
the Node, ``source.component`` ``aws-node-manager``.
``NodeEventRecorder`` posts it through ``agent.kube.client.KubeAdapter``; a failure to post is logged, never raised.
"""

from __future__ import annotations

import logging
import socket
from datetime import UTC, datetime
from typing import Any

from agent.drain.results import NodeCommandResult
from agent.kube.client import KubeAdapter
from agent.kube.views import NodeView
from core.model import CommandKind, CommandStatus

log = logging.getLogger(__name__)

COMPONENT = "aws-node-manager"
EVENT_NAMESPACE = "default"  # where client-go records Events of cluster-scoped objects (metav1.NamespaceDefault)
MAX_MESSAGE_CHARS = 1024  # kubectl describe shows messages whole; keep them short

NORMAL = "Normal"
WARNING = "Warning"


def event_reason(
    kind: CommandKind, status: CommandStatus, *, by_other: bool = False, changed: bool = True
) -> tuple[str, str]:
    """The Event's (reason, type) for a command's outcome (pure).

    drain: NodeDrainSucceeded (Normal), NodeDrainTimedOut / NodeDrainFailed (Warning), NodeDrainSkipped (Normal);
    cordon: NodeCordoned, or NodeCordonedByOther when someone else's cordon was found; uncordon: NodeUncordoned,
    NodeUncordonSkipped when the cordon is someone else's (or there was none). Failures of cordon and uncordon
    are NodeCordonFailed / NodeUncordonFailed (Warning).
    """
    if kind == CommandKind.DRAIN:
        return {
            CommandStatus.SUCCEEDED: ("NodeDrainSucceeded", NORMAL),
            CommandStatus.TIMED_OUT: ("NodeDrainTimedOut", WARNING),
            CommandStatus.SKIPPED: ("NodeDrainSkipped", NORMAL),
        }.get(status, ("NodeDrainFailed", WARNING))
    if kind == CommandKind.CORDON:
        if status != CommandStatus.SUCCEEDED:
            return "NodeCordonFailed", WARNING
        return ("NodeCordonedByOther", NORMAL) if by_other else ("NodeCordoned", NORMAL)
    if status != CommandStatus.SUCCEEDED:
        return "NodeUncordonFailed", WARNING
    return ("NodeUncordoned", NORMAL) if changed and not by_other else ("NodeUncordonSkipped", NORMAL)


def node_event(
    node_name: str,
    node_uid: str,
    reason: str,
    message: str,
    event_type: str,
    now: datetime,
    host: str = "",
) -> dict[str, Any]:
    """A core/v1 Event about Node ``node_name`` as JSON (pure).

    Args:
        node_uid: the Node's ``metadata.uid`` ("" when unknown).
        reason: short CamelCase reason (``NodeDrainSucceeded`` ...).
        message: human-readable, truncated to ``MAX_MESSAGE_CHARS``.
        event_type: ``Normal`` or ``Warning``.
        now: the event time (aware).
        host: the reporting host (the agent's pod / node name), optional.
    """
    stamp = now.astimezone(UTC)
    iso = stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
    involved: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "name": node_name}
    if node_uid:
        involved["uid"] = node_uid
    source: dict[str, Any] = {"component": COMPONENT}
    if host:
        source["host"] = host
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[: MAX_MESSAGE_CHARS - 3] + "..."
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{node_name}.{int(stamp.timestamp() * 1e9):x}", "namespace": EVENT_NAMESPACE},
        "involvedObject": involved,
        "reason": reason,
        "message": message,
        "type": event_type,
        "source": source,
        "firstTimestamp": iso,
        "lastTimestamp": iso,
        "count": 1,
        "reportingComponent": COMPONENT,
        "reportingInstance": host or COMPONENT,
    }


class NodeEventRecorder:
    """Posts Events on Nodes; never raises (failures are logged).

    Args:
        kube: the Kubernetes adapter.
        host: reported as ``source.host`` (default: this machine's hostname, i.e. the agent pod's name).

    Usable as the consumer's ``NodeEventPoster``: ``recorder(node_name, kind, status, message)``.
    """

    def __init__(self, kube: KubeAdapter, host: str | None = None) -> None:
        self.kube = kube
        self.host = socket.gethostname() if host is None else host

    def record(self, node: NodeView, result: NodeCommandResult) -> bool:
        """Post the Event summarizing ``result`` on ``node``; True when posted."""
        reason, event_type = event_reason(
            result.kind, result.status, by_other=result.cordoned_by_other, changed=result.uncordoned
        )
        return self._post(node.name, node.uid, reason, result.message, event_type)

    def post_outcome(self, node_name: str, kind: CommandKind, status: CommandStatus, message: str) -> bool:
        """Post the Event of an outcome decided without the engine (e.g. a drain whose deadline had passed);
        True when posted."""
        reason, event_type = event_reason(kind, status)
        return self._post(node_name, "", reason, message, event_type)

    def __call__(self, node_name: str, kind: CommandKind, status: CommandStatus, message: str) -> None:
        self.post_outcome(node_name, kind, status, message)

    def _post(self, node_name: str, node_uid: str, reason: str, message: str, event_type: str) -> bool:
        body = node_event(node_name, node_uid, reason, message, event_type, datetime.now(UTC), self.host)
        try:
            self.kube.create_event(EVENT_NAMESPACE, body)
        except Exception:
            log.exception("could not post Event %s on node %s", reason, node_name)
            return False
        return True
