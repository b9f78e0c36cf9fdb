"""Parsing the AWS events of record (tests/events/) into ``Event``, and rejecting the malformed ones."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core.exceptions import MalformedEventError, UnsupportedEventError
from lambdas.events.dispatch import DISPATCH, parse_event
from lambdas.events.event import Event, EventKind, InstanceAction
from lambdas.interruption.handler import KINDS as INTERRUPTION_KINDS
from lambdas.refresher.handler import KINDS as REFRESHER_KINDS
from lambdas.replenisher.handler import KINDS as REPLENISHER_KINDS

EVENTS = Path(__file__).resolve().parents[3] / "events"
NOW = datetime(2024, 3, 5, 10, 16, tzinfo=UTC)


def parse_notice(raw: object) -> Event:
    return parse_event(raw, INTERRUPTION_KINDS, NOW)


def load(name: str) -> dict:
    return json.loads((EVENTS / name).read_text())


@pytest.mark.parametrize(
    ("name", "kind", "action"),
    [
        ("spot-interruption-warning.json", EventKind.SPOT_INTERRUPTION, InstanceAction.TERMINATE),
        ("spot-interruption-warning-stop.json", EventKind.SPOT_INTERRUPTION, InstanceAction.STOP),
        ("spot-interruption-warning-hibernate.json", EventKind.SPOT_INTERRUPTION, InstanceAction.HIBERNATE),
        ("rebalance-recommendation.json", EventKind.REBALANCE_RECOMMENDATION, None),
    ],
)
def test_documented_events_become_notices(name, kind, action):
    raw = load(name)
    notice = parse_notice(raw)
    assert notice.kind is kind
    assert notice.instance_action is action
    assert notice.event_id == raw["id"]
    assert notice.instance_id == raw["detail"]["instance-id"]
    assert notice.event_time == datetime.fromisoformat(raw["time"].replace("Z", "+00:00"))
    assert notice.event_time.tzinfo is not None
    assert (notice.source, notice.detail_type) == (raw["source"], raw["detail-type"])
    assert (notice.region, notice.account) == (raw["region"], raw["account"])


def test_fixtures_have_the_documented_envelope():
    for path in sorted(EVENTS.glob("*.json")):
        raw = json.loads(path.read_text())
        if path.name.startswith("malformed-") or raw.get("source") != "aws.ec2":
            continue  # other sources' fixtures (replenisher, agent) are checked by their own tests
        assert set(raw) == {
            "version",
            "id",
            "detail-type",
            "source",
            "account",
            "time",
            "region",
            "resources",
            "detail",
        }, path.name
        assert raw["version"] == "0" and raw["source"] == "aws.ec2"
        assert raw["time"].endswith("Z")
        assert raw["resources"] == [r for r in raw["resources"] if raw["detail"]["instance-id"] in r]
        assert (raw["source"], raw["detail-type"]) in DISPATCH


@pytest.mark.parametrize(
    ("name", "error", "mentions"),
    [
        ("malformed-missing-detail.json", MalformedEventError, "detail"),
        ("malformed-bad-instance-id.json", MalformedEventError, "instance-id"),
        ("malformed-unknown-instance-action.json", MalformedEventError, "instance-action"),
        ("malformed-bad-time.json", MalformedEventError, "time"),
        ("malformed-missing-id.json", MalformedEventError, "id"),
        ("malformed-wrong-detail-type.json", UnsupportedEventError, "EC2 Spot Instance Request Fulfillment"),
    ],
)
def test_malformed_events_are_rejected_with_a_clear_error(name, error, mentions):
    with pytest.raises(error) as info:
        parse_notice(load(name))
    assert mentions in str(info.value)
    assert info.value.reason == error.reason


def test_unsupported_is_told_apart_from_malformed():
    assert UnsupportedEventError.reason == "unsupported_event"
    assert MalformedEventError.reason == "malformed"


@pytest.mark.parametrize("raw", [None, "text", 42, ["a"], {}])
def test_non_events_are_malformed(raw):
    with pytest.raises(MalformedEventError):
        parse_notice(raw)


@pytest.mark.parametrize("field", ["source", "detail-type"])
@pytest.mark.parametrize(
    ("value", "found"),
    [
        ([], "an array"),
        ({}, "an object"),
        (["aws.ec2"], "an array"),
        ({"a": "b"}, "an object"),
        (7, "a number"),
        (None, "null"),
    ],
)
def test_an_envelope_key_that_is_not_a_string_is_malformed(field, value, found):
    raw = load("spot-interruption-warning.json")
    raw[field] = value
    with pytest.raises(MalformedEventError, match=f"{field} must be a string, found {found}"):
        parse_notice(raw)
    with pytest.raises(MalformedEventError, match=field):  # every Lambda's kinds: the same answer
        parse_event(raw, REPLENISHER_KINDS | REFRESHER_KINDS, NOW)


@pytest.mark.parametrize(
    "raw", [{"source": []}, {"source": {}}, {"source": "aws.ec2"}, {"source": "aws.ec2", "detail-type": ["x"]}]
)
def test_bare_envelopes_with_odd_keys_are_malformed(raw):
    with pytest.raises(MalformedEventError):
        parse_notice(raw)


@pytest.mark.parametrize(
    "value",
    [1709633730, 1709633730.5, "1709633730", "2024-03-05", "10:15:30Z", "2024-03-05T10:15Z", None, True, [], {}],
)
def test_a_time_that_is_not_an_rfc3339_string_is_malformed(value):
    raw = load("spot-interruption-warning.json")
    raw["time"] = value
    with pytest.raises(MalformedEventError, match=r"time: .*RFC 3339"):
        parse_notice(raw)


@pytest.mark.parametrize(
    "name", ["scheduled-tick.json", "agent-drain-succeeded.json", "autoscaling-launch-successful.json"]
)
def test_an_epoch_time_is_malformed_for_every_source(name):
    raw = load(name)
    raw["time"] = 1709633730
    with pytest.raises(MalformedEventError, match="time"):
        parse_event(raw, REPLENISHER_KINDS, NOW)


def test_detail_that_is_not_an_object_is_malformed():
    raw = load("spot-interruption-warning.json")
    raw["detail"] = "i-0a1b2c3d4e5f60718"
    with pytest.raises(MalformedEventError, match="detail"):
        parse_notice(raw)


def test_event_id_with_odd_characters_is_malformed():
    raw = load("spot-interruption-warning.json")
    raw["id"] = "abc def/../x"
    with pytest.raises(MalformedEventError, match="id"):
        parse_notice(raw)


def test_time_without_zone_is_read_as_utc():
    raw = load("rebalance-recommendation.json")
    raw["time"] = "2024-03-05T10:05:00"
    assert parse_notice(raw).event_time == datetime(2024, 3, 5, 10, 5, tzinfo=UTC)


def test_time_with_offset_is_converted_to_utc():
    raw = load("rebalance-recommendation.json")
    raw["time"] = "2024-03-05T12:05:00+02:00"
    assert parse_notice(raw).event_time == datetime(2024, 3, 5, 10, 5, tzinfo=UTC)


def test_extra_detail_fields_are_tolerated():
    raw = copy.deepcopy(load("spot-interruption-warning.json"))
    raw["detail"]["something-new"] = "x"
    assert parse_notice(raw).instance_action is InstanceAction.TERMINATE


def test_replayed_event_parses():
    raw = load("spot-interruption-warning.json")
    raw["replay-name"] = "archive-replay"
    assert parse_notice(raw).event_id == raw["id"]


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("autoscaling-launch-unsuccessful.json", EventKind.LAUNCH_FAILED),
        ("autoscaling-launch-successful.json", EventKind.LAUNCH_SUCCEEDED),
        ("scheduled-tick.json", EventKind.TICK),
        ("agent-drain-succeeded.json", EventKind.DRAIN_FINISHED),
    ],
)
def test_replenisher_fixtures_of_record_parse(name: str, kind: EventKind) -> None:
    raw = load(name)
    assert set(raw) == {"version", "id", "detail-type", "source", "account", "time", "region", "resources", "detail"}
    event = parse_event(raw, REPLENISHER_KINDS, NOW)
    assert event.kind is kind and event.event_id == raw["id"]
    if kind is EventKind.LAUNCH_FAILED:
        assert event.asg_name == raw["detail"]["AutoScalingGroupName"] and event.instance_id is None


def test_launch_event_with_a_bad_instance_id_is_malformed() -> None:
    raw = load("autoscaling-launch-successful.json")
    raw["detail"]["EC2InstanceId"] = "not-an-instance"
    with pytest.raises(MalformedEventError, match="EC2InstanceId"):
        parse_event(raw, REPLENISHER_KINDS, NOW)


@pytest.mark.parametrize(
    ("name", "kinds"),
    [
        ("autoscaling-launch-unsuccessful.json", INTERRUPTION_KINDS),
        ("spot-interruption-warning.json", REPLENISHER_KINDS),
        ("autoscaling-launch-unsuccessful.json", REFRESHER_KINDS),
        ("lifecycle-terminate-action.json", REFRESHER_KINDS),
    ],
)
def test_each_lambda_refuses_the_kinds_it_does_not_accept(name: str, kinds: frozenset[EventKind]) -> None:
    with pytest.raises(UnsupportedEventError):
        parse_event(load(name), kinds, NOW)


@pytest.mark.parametrize("raw", [{"trigger": "tick"}, {"action": "status", "cluster": "c"}, {"action": "x"}])
def test_direct_invocations_are_unsupported_where_not_accepted(raw: dict) -> None:
    with pytest.raises(UnsupportedEventError):
        parse_event(raw, REPLENISHER_KINDS, NOW)
    with pytest.raises(UnsupportedEventError):
        parse_event(raw, INTERRUPTION_KINDS, NOW)


def test_agent_result_and_launch_carry_what_the_refresher_reads() -> None:
    result = parse_event(load("agent-drain-succeeded.json"), REFRESHER_KINDS, NOW)
    raw = load("agent-drain-succeeded.json")
    assert (result.kind, result.cluster, result.command_id) == (
        EventKind.DRAIN_FINISHED,
        raw["detail"]["cluster"],
        raw["detail"]["command_id"],
    )
    launch = parse_event(load("autoscaling-launch-successful.json"), REFRESHER_KINDS, NOW)
    assert launch.describe() == "launch of i-0b1c2d3e4f5a60719 in nodes-us-east-1a.demo.k8s.local"
