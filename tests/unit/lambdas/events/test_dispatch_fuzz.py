"""Hostile input, property-based (hypothesis): the event parser (``parse_event``) and the Lambdas' prologue
(``admit``) meet any JSON value, and mutations of every fixture of record (``tests/events/``) and of the manual
refresh payloads. Each input is either an ``Event`` or refused with a ``BadInputError`` whose message says why;
never another exception. An accepted mutation still names only the instance it carries."""

from __future__ import annotations

import pytest

pytest.importorskip("hypothesis", reason="hypothesis (requirements-dev.txt) is not installed")

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings

from core.exceptions import BadInputError
from lambdas.common.prologue import admit
from lambdas.events.dispatch import parse_event
from lambdas.events.event import Event, EventKind
from lambdas.events.scope import Scope
from tests.unit.lambdas.events.fuzz_values import json_values, mutated

EVENTS = Path(__file__).resolve().parents[3] / "events"
FIXTURES = {path.name: json.loads(path.read_text()) for path in sorted(EVENTS.glob("*.json"))}
REQUESTS = [
    {"action": "refresh", "cluster": "demo.k8s.local", "instance_groups": ["nodes-us-east-1a"], "max_age": "7d"},
    {"action": "refresh", "cluster": "demo.k8s.local", "all": True, "max_surge": 2, "drain_timeout": "10m"},
    {"action": "status", "cluster": "demo.k8s.local"},
    {"action": "cancel", "cluster": "demo.k8s.local", "run_id": "20240101T000000Z-ab12cd"},
    {"trigger": "tick"},
    {"trigger": "schedule"},
]
ALL_KINDS = frozenset(EventKind)
NOW = datetime(2024, 3, 5, 10, 16, tzinfo=UTC)
INSTANCE_ID = re.compile(r"i-[0-9a-f]{8,17}")
EXAMPLES = 1500  # per entry point: six thousand inputs in all, about 20 s


def parses_or_refuses(raw: Any) -> Event | None:
    try:
        event = parse_event(raw, ALL_KINDS, NOW)
    except BadInputError as err:
        assert str(err), "a refusal says why"
        return None
    assert isinstance(event, Event)
    return event


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_any_json_value_is_an_event_or_refused(raw: Any) -> None:
    parses_or_refuses(raw)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(list(FIXTURES.values())))
def test_mutated_fixtures_are_events_or_refused_and_name_only_their_own_instance(raw: Any) -> None:
    event = parses_or_refuses(raw)
    if event is not None and event.instance_id is not None:
        assert INSTANCE_ID.fullmatch(event.instance_id)
        assert event.instance_id in json.dumps(raw)  # the instance acted on is the one the input names


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(REQUESTS))
def test_mutated_manual_requests_are_requests_or_refused(raw: Any) -> None:
    event = parses_or_refuses(raw)
    if event is not None:
        assert event.kind in {EventKind.REQUEST, EventKind.TICK, EventKind.SCHEDULE}


class Sink:
    """Logger and telemetry that take anything (admit logs and counts)."""

    def __init__(self) -> None:
        self.counted: list[tuple[Any, ...]] = []

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: self.counted.append((name, *args))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(list(FIXTURES.values())) | json_values)
def test_the_prologue_answers_every_input_and_counts_each_refusal(raw: Any) -> None:
    sink = Sink()
    out = admit(
        raw, ALL_KINDS, NOW, sink, sink, "EventsRejected", scope=Scope(account="123456789012", region="us-east-1")
    )
    if isinstance(out, dict):
        json.dumps(out)  # a response Lambda can return
        assert out["status"] in {"rejected", "acknowledged"} and out.get("reason")
        if out["status"] == "rejected":
            assert any(call[0] == "count_by" and call[1] == "EventsRejected" for call in sink.counted), sink.counted
    else:
        assert isinstance(out, Event)
