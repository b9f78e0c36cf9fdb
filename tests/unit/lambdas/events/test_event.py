"""Events stamped in the far future or outside what UTC can hold are rejected, never acted on or crashed on."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core.exceptions import EventTimeInFutureError, MalformedEventError
from lambdas.events.dispatch import parse_event
from lambdas.events.event import check_not_future
from lambdas.interruption.handler import KINDS as INTERRUPTION_KINDS
from lambdas.replenisher.handler import KINDS as REPLENISHER_KINDS

EVENTS = Path(__file__).resolve().parents[3] / "events"
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def _event(name: str, time: str) -> dict:
    event = json.loads((EVENTS / name).read_text())
    event["time"] = time
    return event


@pytest.mark.parametrize("time", ["9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00"])
@pytest.mark.parametrize(
    "kinds, name",
    [
        (INTERRUPTION_KINDS, "spot-interruption-warning.json"),
        (REPLENISHER_KINDS, "autoscaling-launch-unsuccessful.json"),
    ],
)
def test_times_outside_utc_are_malformed_not_overflow(kinds, name, time):
    with pytest.raises(MalformedEventError):
        parse_event(_event(name, time), kinds, NOW)


@pytest.mark.parametrize(
    "time, future",
    [
        ("2026-11-29T12:04:59Z", False),  # within the allowed clock skew
        ("2026-11-29T12:05:01Z", True),
        ("2100-01-01T00:00:00Z", True),
        ("9999-12-31T23:59:59Z", True),
    ],
)
def test_future_events_are_refused(time, future):
    notice = parse_event(_event("spot-interruption-warning.json", time), INTERRUPTION_KINDS, NOW)
    if future:
        with pytest.raises(EventTimeInFutureError) as info:
            check_not_future(notice.event_time, NOW)
        assert info.value.reason == "time_in_future"
    else:
        check_not_future(notice.event_time, NOW)
