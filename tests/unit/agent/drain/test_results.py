"""The result of one command (``agent.drain.results``): JSON-able as stored and sent."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from agent.drain.policy import GraceSource, PodAction
from agent.drain.results import NodeCommandResult, PodOutcome
from core.model import CommandKind, CommandStatus

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def test_result_is_json_able() -> None:
    result = NodeCommandResult(
        command_id="c",
        kind=CommandKind.DRAIN,
        instance_id="i-0123456789abcdef0",
        node_name="n1",
        status=CommandStatus.TIMED_OUT,
        pods=[PodOutcome(namespace="ns", name="web", action=PodAction.EVICT, evicted_at=T0)],
        started_at=T0,
        finished_at=T0,
    )
    dumped = json.loads(json.dumps(result.model_dump(mode="json")))
    assert dumped["status"] == "timed_out" and dumped["pods"][0]["action"] == "evict"
    assert NodeCommandResult.model_validate(dumped) == result


def test_grace_fields_are_stored_and_older_results_without_them_still_load() -> None:
    outcome = PodOutcome(
        namespace="ns", name="slow", action=PodAction.EVICT, grace_seconds=109, grace_source=GraceSource.DEADLINE
    )
    dumped = json.loads(json.dumps(outcome.model_dump(mode="json")))
    assert dumped["grace_seconds"] == 109 and dumped["grace_source"] == "deadline"
    assert PodOutcome.model_validate(dumped) == outcome
    # a result stored before the fields existed
    old = {"namespace": "ns", "name": "web", "uid": "u", "action": "evict", "reason": "", "attempts": 1, "gone": True}
    loaded = PodOutcome.model_validate(old)
    assert loaded.grace_seconds is None and loaded.grace_source is None
