"""Direct invocations of the refresher: the rules' constant inputs and manual requests."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from core.exceptions import InvalidRequestError, MalformedEventError, UnsupportedEventError
from lambdas.events.dispatch import parse_event
from lambdas.events.event import Event, EventKind
from lambdas.events.request import parse_request
from lambdas.refresher.handler import KINDS

NOW = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)


def parse_trigger(raw: object) -> Event:
    return parse_event(raw, KINDS, NOW)


@pytest.mark.parametrize(
    "payload",
    [
        None,
        [],
        {"action": "refresh"},
        {"cluster": "c", "max_age": "7 days"},
        {"cluster": "c", "all": True, "max_age": "1d"},
        {"cluster": "c", "x": 1},
    ],
)
def test_invalid_requests_are_refused_with_their_fields(payload: object) -> None:
    with pytest.raises(InvalidRequestError) as err:
        parse_request(payload)
    assert err.value.errors


def test_triggers() -> None:
    assert parse_trigger({"trigger": "tick"}).kind is EventKind.TICK
    assert parse_trigger({"trigger": "schedule"}).kind is EventKind.SCHEDULE
    assert parse_trigger({"cluster": "c", "max_age": "168h"}).request.max_age == "168h"
    with pytest.raises(UnsupportedEventError):
        parse_trigger({"source": "aws.ec2", "detail-type": "EC2 Spot Instance Interruption Warning"})
    with pytest.raises(MalformedEventError):
        parse_trigger({"source": "aws.autoscaling", "detail-type": "EC2 Instance Launch Successful", "id": "x"})
    assert parse_trigger({"trigger": "tick"}).event_time == NOW


@pytest.mark.parametrize("raw", [{"trigger": "tick", "dry_run": True}, {"trigger": "weekly"}, "tick"])
def test_odd_trigger_inputs_are_malformed(raw: object) -> None:
    with pytest.raises(MalformedEventError):
        parse_trigger(raw)


@pytest.mark.parametrize(
    "payload",
    [
        # an empty run id (a CLI variable left unset) is not "no run id": it must not cancel whatever run is active
        {"action": "cancel", "cluster": "c", "run_id": ""},
        # an empty group name would be refused later only as "unknown instance groups: " (naming nothing)
        {"cluster": "c", "instance_groups": [""]},
        {"cluster": "c", "instance_groups": ["nodes", ""]},
    ],
)
def test_empty_names_are_refused_at_parse(payload: object) -> None:
    with pytest.raises(InvalidRequestError) as err:
        parse_request(payload)
    assert err.value.errors


def test_a_max_age_no_run_record_can_hold_is_refused_at_parse() -> None:
    """DynamoDB numbers hold 38 digits: a run of ``max_age`` 10^41 days is refused by boto3's serializer
    (``decimal.Rounded``) at its ``CreateRun``, an unhandled error in place of the request's field named."""
    with pytest.raises(InvalidRequestError) as err:
        parse_request({"cluster": "c", "max_age": "9" * 41 + "d"})
    assert [e.split(":")[0] for e in err.value.errors] == ["max_age"]
    assert parse_request({"cluster": "c", "max_age": "36500d"}).max_age == "36500d"  # a century still means "never"
