"""The refresher's service: a rebalance cordon's result wakes the active replacement run, and only that one."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from core.runs import REBALANCE_TRIGGER, Run, RunOptions
from core.settings import RefresherSettings
from lambdas.events.dispatch import parse_event
from lambdas.events.event import Event, EventKind
from lambdas.refresher import service

T0 = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)
SETTINGS = RefresherSettings(cluster_name="c", table_name="t", queue_url="q")
EVENTS = Path(__file__).resolve().parents[3] / "events"


def result(command_id: str) -> Event:
    return Event(
        kind=EventKind.DRAIN_FINISHED,
        event_time=T0,
        command_id=command_id,
        cluster="c",
        instance_id="i-0a1b2c3d4e5f60718",
    )


def deps(active: Run | None) -> Any:
    return SimpleNamespace(settings=SETTINGS, runs=SimpleNamespace(active=lambda: active))


def run(trigger: str) -> Run:
    return Run(run_id="r1", cluster="c", options=RunOptions(trigger=trigger), created_at=T0, updated_at=T0)


@pytest.fixture
def advanced(monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    calls: list[str | None] = []

    def advance_run(_deps: Any, run_id: str | None, _budget: float, _invocation: str | None = None) -> dict[str, Any]:
        calls.append(run_id)
        return {"status": "advanced"}

    monkeypatch.setattr(service, "advance_run", advance_run)
    return calls


def test_a_rebalance_cordons_result_advances_the_replacement_run(advanced: list[str | None]) -> None:
    out = service.serve(result("rebalance-ev-1"), deps(run(REBALANCE_TRIGGER)), 5.0)
    assert out == {"status": "advanced"} and advanced == ["r1"]


@pytest.mark.parametrize("active", [None, run("schedule"), run("manual")])
def test_it_leaves_any_other_run_alone(advanced: list[str | None], active: Run | None) -> None:
    out = service.serve(result("rebalance-ev-1"), deps(active), 5.0)
    assert out == {"status": "acknowledged", "reason": "no_replacement_run"} and advanced == []


def test_other_commands_results_are_still_not_ours(advanced: list[str | None]) -> None:
    out = service.serve(result("spot-ev-1"), deps(run(REBALANCE_TRIGGER)), 5.0)
    assert out["reason"] == "not_ours" and advanced == []


def test_a_cordon_result_is_parsed_as_an_agent_result() -> None:
    raw = json.loads((EVENTS / "agent-drain-succeeded.json").read_text())
    raw["detail-type"] = "Node Cordon Succeeded"
    raw["detail"] = {**raw["detail"], "kind": "cordon", "command_id": "rebalance-ev-1"}
    event = parse_event(raw, {EventKind.DRAIN_FINISHED}, T0)
    assert isinstance(event, Event) and event.kind is EventKind.DRAIN_FINISHED and event.command_id == "rebalance-ev-1"
