"""The consumer's pure decisions (``agent.consumer.decisions``): message sorting, binding to the record, refusals,
deadlines."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from agent.consumer.decisions import (
    MessageVerdict,
    RefusalDisposition,
    Rejection,
    bind_to_record,
    capped,
    deadline_passed,
    on_refusal,
    parse_message,
    tightened,
)
from core.model import CommandKind, DrainOptions
from tests.unit.agent.commands import NOW
from tests.unit.agent.commands import spot_command as _cmd


@pytest.mark.parametrize(
    "body, why",
    [
        ("not json at all", "body"),
        ("", "body"),
        ('{"command_id": "x"}', "cluster"),
        (_cmd().model_dump_json().replace("i-0123456789abcdef0", "node-1"), "instance_id"),
        (json.dumps({**json.loads(_cmd().model_dump_json()), "kind": "reboot"}), "kind"),
        (json.dumps({**json.loads(_cmd().model_dump_json()), "extra": 1}), "extra"),
    ],
)
def test_garbage_bodies_are_malformed_and_say_where(body: str, why: str) -> None:
    parsed = parse_message(body, "demo")
    assert parsed.verdict is MessageVerdict.MALFORMED
    assert parsed.command is None
    assert why in parsed.why


def test_a_command_of_another_cluster_is_foreign() -> None:
    parsed = parse_message(_cmd(cluster="other").model_dump_json(), "demo")
    assert parsed.verdict is MessageVerdict.FOREIGN
    assert parsed.command is not None and parsed.command.cluster == "other"
    assert "other" in parsed.why and "demo" in parsed.why


def test_a_command_of_this_cluster_runs() -> None:
    parsed = parse_message(_cmd().model_dump_json(), "demo")
    assert parsed.verdict is MessageVerdict.RUN
    assert parsed.command == _cmd()


def _item(stored: object) -> dict[str, object]:
    """A CMD# item as ``record_command`` writes it (plain values, as ``Table.get`` returns them)."""
    return {"command": stored, "kind": "drain", "instance_id": "i-0123456789abcdef0", "status": "queued"}


def test_a_body_with_no_item_is_not_bound() -> None:
    binding = bind_to_record(_cmd(), None)
    assert binding.command is None and binding.rejection is Rejection.NO_RECORD
    assert "spot-1" in binding.why


@pytest.mark.parametrize("stored", [None, "spot-1", {"command_id": "spot-1"}])
def test_an_item_without_a_readable_command_is_no_record(stored: object) -> None:
    binding = bind_to_record(_cmd(), _item(stored))
    assert binding.command is None and binding.rejection is Rejection.NO_RECORD


@pytest.mark.parametrize(
    "change, field",
    [
        ({"instance_id": "i-0fedcba9876543210"}, "instance_id"),
        ({"kind": CommandKind.CORDON}, "kind"),
        ({"deadline": NOW + timedelta(days=3650)}, "deadline"),
        ({"node_name": "ip-10-0-0-5.ec2.internal"}, "node_name"),
        ({"node_name": None}, "node_name"),
        ({"options": DrainOptions(grace_period_seconds=0)}, "options"),
        ({"cluster": "other"}, "cluster"),
        ({"command_id": "spot-2"}, "command_id"),
    ],
)
def test_a_body_that_differs_from_its_record_is_a_mismatch(change: dict[str, object], field: str) -> None:
    recorded = _item(_cmd().model_dump(mode="json"))
    binding = bind_to_record(_cmd().model_copy(update=change), recorded)
    assert binding.command is None and binding.rejection is Rejection.MISMATCH
    assert binding.why.startswith(f"{field}: body ")


def test_a_bound_body_yields_the_stored_command() -> None:
    recorded = _cmd().model_copy(update={"reason": "as the Lambda wrote it"})
    binding = bind_to_record(_cmd(), _item(recorded.model_dump(mode="json")))
    assert binding.rejection is None and binding.command == recorded  # the stored one, reason included


def test_the_bound_fields_survive_the_table_round_trip() -> None:
    # Table.get turns Decimals back to int or float: a grace period recorded as 30 reads back as the int 30
    recorded = _cmd().model_copy(update={"options": DrainOptions(grace_period_seconds=30)})
    item = _item(json.loads(json.dumps(recorded.model_dump(mode="json"))))
    assert bind_to_record(recorded, item).command == recorded


def test_only_drains_are_not_started_after_their_deadline() -> None:
    assert deadline_passed(_cmd("drain", deadline_in=-1), NOW)
    assert not deadline_passed(_cmd("drain", deadline_in=5), NOW)
    assert not deadline_passed(_cmd("cordon", deadline_in=-1), NOW)
    assert not deadline_passed(_cmd("uncordon", deadline_in=-60), NOW)


def test_a_finished_and_notified_command_is_a_duplicate() -> None:
    item = {"status": "succeeded", "finished_at": NOW.isoformat(), "reported_at": NOW.isoformat()}
    assert on_refusal(item, NOW.timestamp(), 60, 30) == (RefusalDisposition.DUPLICATE, 0)


def test_a_finished_command_never_notified_is_notified_again_once_its_worker_is_surely_done() -> None:
    item = {"status": "timed_out", "finished_at": (NOW - timedelta(seconds=31)).isoformat()}
    assert on_refusal(item, NOW.timestamp(), 60, 30) == (RefusalDisposition.NOTIFY_AGAIN, 0)
    # finished 10 s ago: its worker may still be notifying; look again when it should be done
    recent = {"status": "failed", "finished_at": (NOW - timedelta(seconds=10)).isoformat()}
    assert on_refusal(recent, NOW.timestamp(), 60, 30) == (RefusalDisposition.LATER, 21)


def test_a_command_running_elsewhere_comes_back_when_its_heartbeat_would_be_stale() -> None:
    item = {"status": "running", "heartbeat_at": NOW.timestamp() - 2, "worker": "other:1"}
    assert on_refusal(item, NOW.timestamp(), 6, 5) == (RefusalDisposition.LATER, 5)
    # far from stale: not before it could be (a look before spends one of the queue's 3 receives for nothing)
    assert on_refusal(item, NOW.timestamp(), 600, 30) == (RefusalDisposition.LATER, 599)
    # already stale (the race was lost to another taker): look again at once
    stale = {"status": "running", "heartbeat_at": NOW.timestamp() - 100}
    assert on_refusal(stale, NOW.timestamp(), 60, 30) == (RefusalDisposition.LATER, 1)


def test_a_copy_of_a_command_a_live_holder_works_from_another_message_is_redundant() -> None:
    item = {"status": "running", "heartbeat_at": NOW.timestamp() - 2, "worker": "other:1", "message_id": "m-1"}
    assert on_refusal(item, NOW.timestamp(), 60, 30, "m-2") == (RefusalDisposition.REDUNDANT, 0)
    # the holder's own message (its visibility lapsed, or a handback whose release failed left the command running):
    # left for when the holder would be stale, as before; deleting it could leave the command with no message
    assert on_refusal(item, NOW.timestamp(), 60, 30, "m-1") == (RefusalDisposition.LATER, 59)
    # a holder already stale (a race lost to another taker): never deleted, looked at again at once
    stale = {**item, "heartbeat_at": NOW.timestamp() - 100}
    assert on_refusal(stale, NOW.timestamp(), 60, 30, "m-2") == (RefusalDisposition.LATER, 1)
    # an item that names no message (started by an older agent), or a message id unknown: later, as before
    unnamed = {key: value for key, value in item.items() if key != "message_id"}
    assert on_refusal(unnamed, NOW.timestamp(), 60, 30, "m-2") == (RefusalDisposition.LATER, 59)
    assert on_refusal(item, NOW.timestamp(), 60, 30) == (RefusalDisposition.LATER, 59)


def test_a_refusal_without_an_item_or_while_queued_looks_again_soon() -> None:
    assert on_refusal(None, NOW.timestamp(), 60, 30) == (RefusalDisposition.LATER, 1)
    assert on_refusal({"status": "queued", "attempt": 3}, NOW.timestamp(), 60, 30) == (RefusalDisposition.LATER, 1)


def test_capped_brings_a_far_deadline_to_the_bound_and_leaves_a_near_one() -> None:
    far, near = _cmd(deadline_in=86400), _cmd(deadline_in=60)
    bounded = capped(far, NOW, 3600)
    assert bounded.deadline == NOW + timedelta(seconds=3600) and bounded.command_id == far.command_id
    assert capped(near, NOW, 3600) is near


def test_the_handback_delay_doubles_per_receive_up_to_its_cap_and_the_deadline() -> None:
    from agent.consumer.decisions import handback_delay

    assert [handback_delay(n, 5, 900) for n in range(1, 10)] == [5, 10, 20, 40, 80, 160, 320, 640, 900]
    assert handback_delay(10**6, 5, 900) == 900  # no overflow
    assert handback_delay(4, 5, 900, seconds_left=12.2) == 13  # tried once more before the deadline
    assert handback_delay(4, 5, 900, seconds_left=-3) == 1  # at least 1
    assert handback_delay(3, 0, 900) == 0  # a zero base: at once


def test_the_receive_count_is_read_from_the_message_attributes() -> None:
    from agent.consumer.decisions import receive_count

    assert receive_count({"Attributes": {"ApproximateReceiveCount": "3"}}) == 3
    assert receive_count({}) == 1 and receive_count({"Attributes": {"ApproximateReceiveCount": "x"}}) == 1
    assert receive_count({"Attributes": {"ApproximateReceiveCount": "0"}}) == 1


def test_a_refused_control_plane_drain_never_completes_its_hook() -> None:
    from agent.consumer.decisions import CONTROL_PLANE_REFUSED, completes_hook

    assert completes_hook({"status": "failed"}) and completes_hook(None)
    assert not completes_hook({"status": "failed", CONTROL_PLANE_REFUSED: True})


def test_only_an_action_pending_when_the_drain_ended_counts_as_left_pending() -> None:
    from agent.consumer.decisions import pending_when_ended

    ended = NOW.isoformat()
    assert pending_when_ended({"recorded_at": (NOW - timedelta(seconds=5)).isoformat()}, ended)
    assert pending_when_ended({"recorded_at": ended}, ended)
    assert not pending_when_ended({"recorded_at": (NOW + timedelta(seconds=5)).isoformat()}, ended)  # recorded later
    naive = NOW.replace(tzinfo=None).isoformat()
    for hook, finished in (({"recorded_at": naive}, ended), ({}, ended), ({"recorded_at": ended}, naive)):
        assert not pending_when_ended(hook, finished)  # a time missing, without a zone or unreadable: not completed
    assert not pending_when_ended({"recorded_at": ended}, None) and not pending_when_ended({"recorded_at": 7}, "x")


def test_a_drain_tightened_to_a_spot_deadline_never_gives_its_cordon_back() -> None:
    # a rebalance-replace drain that pauses its run on failure: the Spot warning came before the agent started it
    drain = _cmd().model_copy(
        update={"reason": "rebalance-replace r1 step 0", "options": DrainOptions(uncordon_on_failure=True)}
    )
    spot = drain.deadline - timedelta(seconds=60)
    started = tightened(drain, {"deadline_tightened_to": spot.isoformat()})
    assert started.deadline == spot and not started.options.uncordon_on_failure
    assert started.options.model_copy(update={"uncordon_on_failure": True}) == drain.options  # nothing else changed
    later = drain.deadline + timedelta(seconds=60)
    for item in ({"deadline_tightened_to": later.isoformat()}, {}, None, {"deadline_tightened_to": "garbage"}):
        assert tightened(drain, item) is drain  # not tightened: the command as recorded
