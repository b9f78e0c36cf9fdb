"""The handler prologue: one rejection answer for bad input, the event's keys on the log lines, metrics flushed,
events of another account or region acknowledged and counted, never passed on."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from lambdas.common.prologue import LOG_KEYS, MAX_ERROR_CHARS, admit, invocation
from lambdas.events.event import Event, EventKind
from lambdas.events.scope import Scope

EVENTS = Path(__file__).resolve().parents[3] / "events"
NOW = datetime(2024, 3, 5, 10, 16, tzinfo=UTC)
SPOT = frozenset({EventKind.SPOT_INTERRUPTION})
REFRESH = frozenset({EventKind.REQUEST, EventKind.SCHEDULE, EventKind.TICK})
REPLENISH = frozenset({EventKind.LAUNCH_FAILED, EventKind.LAUNCH_SUCCEEDED, EventKind.TICK, EventKind.DRAIN_FINISHED})
ACCOUNT = "123456789012"  # what the fixtures of record carry
HOME = Scope(account=ACCOUNT, region="us-east-1")


class Recorder:
    """A stand-in for both the Powertools Logger and Telemetry."""

    def __init__(self) -> None:
        self.counts: list[tuple[str, ...]] = []
        self.keys: dict[str, Any] = {}
        self.correlation: str | None = None
        self.warnings: list[str] = []
        self.errors: list[str] = []
        self.flushed = 0

    def count(self, name: str, value: int = 1) -> None:
        self.counts.append((name,))

    def count_by(self, name: str, dimension: str, value: str) -> None:
        self.counts.append((name, dimension, value))

    def flush(self) -> None:
        self.flushed += 1

    def set_correlation_id(self, value: str) -> None:
        self.correlation = value

    def append_keys(self, **keys: Any) -> None:
        self.keys.update(keys)

    def remove_keys(self, keys: list[str]) -> None:
        for key in keys:
            self.keys.pop(key, None)

    def warning(self, message: str, extra: dict[str, Any] | None = None) -> None:
        self.warnings.append(message)

    def error(self, message: str, extra: dict[str, Any] | None = None) -> None:
        self.errors.append(message)


def spot() -> dict[str, Any]:
    return json.loads((EVENTS / "spot-interruption-warning.json").read_text())


def test_an_event_gets_its_keys_for_the_invocation_only() -> None:
    rec = Recorder()
    with invocation(rec, rec, "EventsReceived"):
        event = admit(spot(), SPOT, NOW, rec, rec, "EventsRejected", scope=HOME)
        assert isinstance(event, Event)
        assert rec.keys == {"event_kind": "spot_interruption", "instance_id": event.instance_id}
        assert rec.correlation == event.event_id
    assert not set(LOG_KEYS) & set(rec.keys) and rec.flushed == 1
    assert rec.counts == [("EventsReceived",)]


@pytest.mark.parametrize(
    ("raw", "kinds", "reason"),
    [
        ({"source": "aws.ec2", "detail-type": "Other"}, SPOT, "unsupported_event"),
        ({**spot(), "detail": {}}, SPOT, "malformed"),
        ({**spot(), "time": "2024-03-05T11:00:00Z"}, SPOT, "time_in_future"),
        ({"action": "refresh"}, REFRESH, "invalid_request"),
        ({"source": []}, SPOT, "malformed"),  # found by fuzzing: a TypeError (unhashable) before
        ({**spot(), "detail-type": {"a": 1}}, SPOT, "malformed"),
        ({**spot(), "time": 1709633730}, SPOT, "malformed"),
    ],
)
def test_bad_input_is_answered_logged_and_counted_never_raised(raw: Any, kinds: frozenset, reason: str) -> None:
    rec = Recorder()
    response = admit(raw, kinds, NOW, rec, rec, "EventsRejected", scope=HOME)
    assert isinstance(response, dict) and response["status"] == "rejected" and response["reason"] == reason
    assert rec.counts == [("EventsRejected", "reason", reason)] and len(rec.warnings) == 1
    assert ("errors" in response) is (reason == "invalid_request")


def test_future_events_are_let_through_when_the_lambda_does_not_refuse_them() -> None:
    raw = {**spot(), "time": "2024-03-05T11:00:00Z"}
    assert isinstance(admit(raw, SPOT, NOW, Recorder(), Recorder(), "x", scope=HOME, reject_future=False), Event)


def test_a_huge_error_is_cut_to_fit_a_log_event() -> None:
    raw = {"source": "aws.ec2", "detail-type": "x" * 10 * MAX_ERROR_CHARS}
    response = admit(raw, SPOT, NOW, Recorder(), Recorder(), "EventsRejected", scope=HOME)
    assert isinstance(response, dict) and len(response["error"]) < MAX_ERROR_CHARS + 100


def fixture(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / name).read_text())


# each Lambda's bus events: the interruption Lambda's, the replenisher's and the refresher's
BUS_EVENTS = [
    ("spot-interruption-warning.json", SPOT),
    ("autoscaling-launch-unsuccessful.json", REPLENISH),
    ("scheduled-tick.json", REPLENISH),
    ("agent-drain-succeeded.json", REPLENISH),
    ("autoscaling-launch-successful.json", REFRESH | {EventKind.LAUNCH_SUCCEEDED}),
]


@pytest.mark.parametrize(("name", "kinds"), BUS_EVENTS)
@pytest.mark.parametrize(
    ("envelope", "reason"),
    [
        ({"account": "210987654321"}, "foreign_account"),
        ({"region": "eu-west-1"}, "foreign_region"),
        ({"account": "210987654321", "region": "eu-west-1"}, "foreign_account"),
    ],
)
def test_an_event_of_another_account_or_region_is_acknowledged_and_counted_never_passed_on(
    name: str, kinds: frozenset, envelope: dict[str, str], reason: str
) -> None:
    rec = Recorder()
    raw = {**fixture(name), **envelope}
    with invocation(rec, rec, "EventsReceived"):
        response = admit(raw, kinds, NOW, rec, rec, "EventsRejected", scope=HOME, reject_future=False)
    assert not isinstance(response, Event)
    assert response["status"] == "acknowledged" and response["reason"] == reason
    assert response["event_id"] == raw["id"]
    assert rec.counts == [("EventsReceived",), ("EventsOutOfScope", "reason", reason)]
    assert len(rec.warnings) == 1 and not rec.errors


@pytest.mark.parametrize(("name", "kinds"), BUS_EVENTS)
def test_the_deployments_own_events_pass(name: str, kinds: frozenset) -> None:
    rec = Recorder()
    event = admit(fixture(name), kinds, NOW, rec, rec, "EventsRejected", scope=HOME, reject_future=False)
    assert isinstance(event, Event) and event.account == ACCOUNT and event.region == "us-east-1"
    assert rec.counts == []


@pytest.mark.parametrize(
    ("scope", "reason"),
    [(Scope(account=None, region="us-east-1"), "account_unknown"), (Scope(account=ACCOUNT), "region_unknown")],
)
def test_a_deployment_that_does_not_know_its_scope_acts_on_no_bus_event(scope: Scope, reason: str) -> None:
    rec = Recorder()
    response = admit(spot(), SPOT, NOW, rec, rec, "EventsRejected", scope=scope)
    assert not isinstance(response, Event) and response["reason"] == reason
    assert rec.counts == [("EventsOutOfScope", "reason", reason)] and len(rec.errors) == 1


def test_direct_inputs_carry_no_envelope_and_are_not_judged() -> None:
    rec = Recorder()
    event = admit({"trigger": "tick"}, REFRESH, NOW, rec, rec, "EventsRejected", scope=Scope())
    assert isinstance(event, Event) and event.kind is EventKind.TICK and rec.counts == []
