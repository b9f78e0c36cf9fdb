from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from core.model import Command, CommandKind, CommandStatus, NodeRecord, parse_provider_id

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "provider_id, expected",
    [
        ("aws:///us-east-1a/i-0abc12345678def01", ("us-east-1a", "i-0abc12345678def01")),
        ("aws:///eu-west-3c/i-12345678", ("eu-west-3c", "i-12345678")),
        ("aws:///us-east-1a/", None),
        ("gce://project/zone/name", None),
        ("aws:///us-east-1a/i-XYZ", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_provider_id(provider_id, expected):
    assert parse_provider_id(provider_id) == expected


def _command(**kw):
    base = dict(  # noqa: C408 - keyword style mirrors the Command fields
        command_id="spot-1",
        cluster="c",
        kind="drain",
        instance_id="i-0123456789abcdef0",
        deadline=NOW + timedelta(seconds=120),
    )
    base.update(kw)
    return Command(**base)


def test_command_round_trips_through_json():
    cmd = _command(node_name="ip-10-0-0-1.ec2.internal")
    again = Command.model_validate_json(cmd.model_dump_json())
    assert again == cmd
    assert again.kind is CommandKind.DRAIN
    assert again.seconds_left(NOW) == 120


@pytest.mark.parametrize(
    "bad",
    [
        {"instance_id": "not-an-instance"},
        {"kind": "explode"},
        {"deadline": datetime(2026, 1, 1)},  # naive
        {"command_id": ""},
        {"unexpected": 1},
    ],
)
def test_command_rejects_bad_fields(bad):
    with pytest.raises(ValidationError):
        _command(**bad)


def test_deadline_normalised_to_utc():
    cmd = _command(deadline=datetime(2026, 11, 29, 13, 2, tzinfo=timezone(timedelta(hours=1))))
    assert cmd.deadline == NOW + timedelta(seconds=120)


def test_terminal_statuses():
    assert not CommandStatus.QUEUED.terminal and not CommandStatus.RUNNING.terminal
    assert all(
        s.terminal
        for s in (CommandStatus.SUCCEEDED, CommandStatus.TIMED_OUT, CommandStatus.FAILED, CommandStatus.SKIPPED)
    )


def test_node_record_freshness():
    rec = NodeRecord(instance_id="i-0123456789abcdef0", node_name="n", reported_at=NOW)
    assert rec.fresh(NOW + timedelta(seconds=60), 60)
    assert not rec.fresh(NOW + timedelta(seconds=61), 60)


def test_a_record_read_with_its_mark_is_the_record_confirmed_by_it() -> None:
    item = {
        "pk": "CLUSTER#c",
        "sk": "NODE#i-0123456789abcdef0",
        "instance_id": "i-0123456789abcdef0",
        "node_name": "n",
        "ready": True,
        "roles": ["node"],
        "reported_at": "2026-01-05T00:00:00+00:00",
        "expires_at": 1767657600,
    }
    mark = datetime(2026, 1, 5, 0, 9, tzinfo=UTC)
    read = NodeRecord.confirmed(item, mark)
    assert read == NodeRecord.model_validate(item).with_mark(mark)
    assert read.confirmed_at == mark and read.fresh(mark + timedelta(seconds=60), 300)
    assert NodeRecord.confirmed(item, None) == NodeRecord.model_validate(item)
    assert NodeRecord.confirmed(item, None).confirmed_at is None
    with pytest.raises(ValidationError):
        NodeRecord.confirmed({"instance_id": "i-0123456789abcdef0"}, mark)
