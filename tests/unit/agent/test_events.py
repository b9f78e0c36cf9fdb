"""Kubernetes Events on the Node (``agent.events``): reason and type per outcome, the Event body."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agent.events import event_reason, node_event
from core.model import CommandKind, CommandStatus

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("kind", "status", "by_other", "changed", "expected"),
    [
        (CommandKind.DRAIN, CommandStatus.SUCCEEDED, False, True, ("NodeDrainSucceeded", "Normal")),
        (CommandKind.DRAIN, CommandStatus.TIMED_OUT, False, True, ("NodeDrainTimedOut", "Warning")),
        (CommandKind.DRAIN, CommandStatus.FAILED, False, True, ("NodeDrainFailed", "Warning")),
        (CommandKind.CORDON, CommandStatus.SUCCEEDED, False, True, ("NodeCordoned", "Normal")),
        (CommandKind.CORDON, CommandStatus.SUCCEEDED, True, True, ("NodeCordonedByOther", "Normal")),
        (CommandKind.UNCORDON, CommandStatus.SUCCEEDED, False, True, ("NodeUncordoned", "Normal")),
        (CommandKind.UNCORDON, CommandStatus.SUCCEEDED, True, False, ("NodeUncordonSkipped", "Normal")),
        (CommandKind.UNCORDON, CommandStatus.FAILED, False, False, ("NodeUncordonFailed", "Warning")),
    ],
)
def test_event_reason(
    kind: CommandKind, status: CommandStatus, by_other: bool, changed: bool, expected: tuple[str, str]
) -> None:
    assert event_reason(kind, status, by_other=by_other, changed=changed) == expected


def test_node_event_body() -> None:
    body = node_event("n1", "nu", "NodeDrainSucceeded", "x" * 2000, "Normal", T0, host="agent-abc")
    assert body["metadata"]["namespace"] == "default"
    assert body["metadata"]["name"].startswith("n1.")
    assert body["involvedObject"] == {"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "nu"}
    assert body["source"] == {"component": "aws-node-manager", "host": "agent-abc"}
    assert len(body["message"]) == 1024 and body["message"].endswith("...")
    assert body["firstTimestamp"] == "2026-03-01T12:00:00Z" and body["count"] == 1
