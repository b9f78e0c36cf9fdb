"""The agent's EventBridge event (``agent.report``): detail-type per outcome, the detail and its summary."""

from __future__ import annotations

import pytest

from agent.consumer.decisions import (
    DEADLINE_PASSED,
    own_result,
)
from agent.report import detail_type, event_detail, summarize
from core.model import CommandKind, CommandStatus
from tests.unit.agent.commands import spot_command as _cmd


@pytest.mark.parametrize(
    "kind, status, expected",
    [
        (CommandKind.DRAIN, CommandStatus.SUCCEEDED, "Node Drain Succeeded"),
        (CommandKind.DRAIN, CommandStatus.FAILED, "Node Drain Failed"),
        (CommandKind.DRAIN, CommandStatus.TIMED_OUT, "Node Drain Failed"),
        (CommandKind.DRAIN, CommandStatus.SKIPPED, "Node Drain Skipped"),
        (CommandKind.CORDON, CommandStatus.SUCCEEDED, "Node Cordon Succeeded"),
        (CommandKind.UNCORDON, CommandStatus.SUCCEEDED, "Node Uncordon Succeeded"),
        (CommandKind.UNCORDON, CommandStatus.FAILED, "Node Uncordon Failed"),
    ],
)
def test_detail_types(kind: CommandKind, status: CommandStatus, expected: str) -> None:
    assert detail_type(kind, status) == expected


def test_no_detail_type_before_the_end() -> None:
    with pytest.raises(ValueError):
        detail_type(CommandKind.DRAIN, CommandStatus.RUNNING)


def test_detail_carries_the_command_and_a_summary_of_the_result() -> None:
    result = {
        "node_name": "ip-10-0-1-17.ec2.internal",
        "message": "drained 3 pods",
        "pods": [
            {"action": "evict", "evicted_at": "2026-01-01T00:00:00Z"},
            {"action": "evict", "gone": True},
            {"action": "delete", "evicted_at": "2026-01-01T00:00:01Z"},
            {"action": "skip"},
            {"action": "evict", "attempts": 7, "evicted_at": None},
        ],
        "remaining": [{"namespace": "web", "name": "a", "why": "blocked by PodDisruptionBudget web"}],
        "errors": ["x"],
        "durations": {"total": 12.5},
    }
    detail = event_detail(_cmd(), CommandStatus.TIMED_OUT, result, attempt=2, worker="agent-1:7")
    assert detail == {
        "command_id": "spot-1",
        "cluster": "demo",
        "instance_id": "i-0123456789abcdef0",
        "node_name": "ip-10-0-1-17.ec2.internal",
        "kind": "drain",
        "status": "timed_out",
        "reason": "spot interruption warning",
        "attempt": 2,
        "worker": "agent-1:7",
        "summary": {"message": "drained 3 pods", "evicted": 3, "remaining": 1, "errors": 1, "duration_seconds": 12.5},
    }


def test_a_result_decided_without_the_engine_summarizes_to_nothing_done() -> None:
    result = own_result(_cmd(), CommandStatus.TIMED_OUT, DEADLINE_PASSED)
    assert result["status"] == "timed_out" and result["message"] == DEADLINE_PASSED
    assert summarize(result) == {
        "message": DEADLINE_PASSED,
        "evicted": 0,
        "remaining": 0,
        "errors": 0,
        "duration_seconds": None,
    }
