"""``CMD#`` items: conditional transitions, look-ups by instance, cancellation (moto's DynamoDB)."""

from datetime import timedelta

import pytest

from adapters.dynamo.command_delivery import Delivery, record_and_send
from adapters.dynamo.commands import (
    cancel_queued_command,
    commands_for_instance,
    end_abandoned_command,
    recorded_command,
)
from core.exceptions import CommandExistsError, CommandTransitionError
from core.model import Command, CommandKind, CommandStatus, utcnow
from tests.dynamo_reads import answered_sort_keys


def _cmd(cid="spot-1"):
    return Command(
        command_id=cid,
        cluster="demo",
        kind="drain",
        instance_id="i-0123456789abcdef0",
        deadline=utcnow() + timedelta(seconds=120),
    )


def test_a_command_is_recorded_once(store):
    store.record_command(_cmd(), ttl_seconds=3600)
    with pytest.raises(CommandExistsError) as info:
        store.record_command(_cmd(), ttl_seconds=3600)
    assert info.value.current["status"] == "queued"


def test_running_command_is_not_taken_by_a_live_worker(store):
    store.record_command(_cmd(), ttl_seconds=3600)
    assert store.start_command(_cmd(), "agent-a", stale_after_seconds=60, ttl_seconds=3600) == 1
    with pytest.raises(CommandTransitionError) as info:
        store.start_command(_cmd(), "agent-b", stale_after_seconds=60, ttl_seconds=3600)
    assert info.value.current["worker"] == "agent-a"


def test_a_worker_retakes_its_own_running_command_only_when_it_says_it_holds_no_job_for_it(store):
    store.record_command(_cmd(), ttl_seconds=3600)
    first = store.start_command(_cmd(), "agent-a", stale_after_seconds=60, ttl_seconds=3600)
    with pytest.raises(CommandTransitionError):  # a live heartbeat: not even its own worker without retake_own
        store.start_command(_cmd(), "agent-a", stale_after_seconds=60, ttl_seconds=3600)
    with pytest.raises(CommandTransitionError):  # another worker may not retake it
        store.start_command(_cmd(), "agent-b", stale_after_seconds=60, ttl_seconds=3600, retake_own=True)
    second = store.start_command(_cmd(), "agent-a", stale_after_seconds=60, ttl_seconds=3600, retake_own=True)
    assert second == first + 1
    with pytest.raises(CommandTransitionError):  # the failed handback's attempt is fenced off
        store.heartbeat_command("spot-1", "agent-a", first)
    store.finish_command("spot-1", "agent-a", second, CommandStatus.SUCCEEDED, {})
    with pytest.raises(CommandTransitionError):  # terminal: never retaken
        store.start_command(_cmd(), "agent-a", stale_after_seconds=60, ttl_seconds=3600, retake_own=True)


def test_stale_running_command_is_taken_over_and_the_old_worker_cannot_finish(store):
    store.record_command(_cmd(), ttl_seconds=3600)
    first = store.start_command(_cmd(), "agent-a", stale_after_seconds=60, ttl_seconds=3600)
    later = utcnow() + timedelta(seconds=61)
    second = store.start_command(_cmd(), "agent-b", stale_after_seconds=60, ttl_seconds=3600, now=later)
    assert second == first + 1
    with pytest.raises(CommandTransitionError):
        store.finish_command("spot-1", "agent-a", first, CommandStatus.SUCCEEDED, {})
    with pytest.raises(CommandTransitionError):
        store.heartbeat_command("spot-1", "agent-a", first)
    store.finish_command("spot-1", "agent-b", second, CommandStatus.SUCCEEDED, {"evicted": 3, "seconds": 0.5})
    item = store.get_command("spot-1")
    assert item["status"] == "succeeded" and item["attempt"] == 2 and item["result"]["seconds"] == 0.5


def test_terminal_command_cannot_restart(store):
    store.record_command(_cmd(), ttl_seconds=3600)
    attempt = store.start_command(_cmd(), "agent-a", stale_after_seconds=60, ttl_seconds=3600)
    store.finish_command("spot-1", "agent-a", attempt, CommandStatus.TIMED_OUT, {"remaining": ["web-1"]})
    with pytest.raises(CommandTransitionError) as info:
        store.start_command(
            _cmd(), "agent-b", stale_after_seconds=0, ttl_seconds=3600, now=utcnow() + timedelta(hours=1)
        )
    assert info.value.current["status"] == "timed_out"


def test_a_command_without_a_record_cannot_start(store):
    with pytest.raises(CommandTransitionError) as info:
        store.start_command(_cmd("manual-1"), "agent-a", stale_after_seconds=60, ttl_seconds=3600)
    assert info.value.current is None
    assert store.get_command("manual-1") is None  # nothing written on the body's behalf


def test_a_start_keeps_the_recorded_command(store):
    store.record_command(_cmd(), ttl_seconds=3600)
    other = _cmd().model_copy(update={"instance_id": "i-0fedcba9876543210", "kind": CommandKind.CORDON})
    store.start_command(other, "agent-a", stale_after_seconds=60, ttl_seconds=3600)
    item = store.get_command("spot-1")
    assert item["status"] == "running"
    assert (item["kind"], item["instance_id"]) == ("drain", "i-0123456789abcdef0")
    assert recorded_command(item) == _cmd().model_copy(update={"deadline": recorded_command(item).deadline})


def test_finish_needs_a_terminal_status(store):
    with pytest.raises(ValueError):
        store.finish_command("spot-1", "agent-a", 1, CommandStatus.RUNNING, {})


def test_a_released_command_is_started_again_with_the_next_attempt(store):
    store.record_command(_cmd(), ttl_seconds=3600)
    first = store.start_command(_cmd(), "agent-a", stale_after_seconds=60, ttl_seconds=3600)
    store.release_command("spot-1", "agent-a", first)
    assert store.get_command("spot-1")["status"] == "queued"
    # Not stale, yet another worker may take it at once, and the old worker can no longer finish it.
    assert store.start_command(_cmd(), "agent-b", stale_after_seconds=60, ttl_seconds=3600) == first + 1
    with pytest.raises(CommandTransitionError):
        store.release_command("spot-1", "agent-a", first)


def test_only_the_instances_commands_are_sent_back(store, monkeypatch):
    # a Spot warning's read: a week of other instances' commands stays in DynamoDB
    store.record_command(_cmd("spot-1"), ttl_seconds=3600)
    for n in range(5):
        store.put(f"CMD#refresh-run-{n}", {"status": "succeeded", "instance_id": f"i-other{n}", "kind": "drain"})
    answered = answered_sort_keys(monkeypatch, store.table)
    assert [i["command"]["command_id"] for i in commands_for_instance(store, "i-0123456789abcdef0")] == ["spot-1"]
    assert answered == ["CMD#spot-1"]
    assert commands_for_instance(store, "i-0123456789abcdef0", CommandKind.CORDON) == []


def test_commands_of_an_instance_newest_first_and_cancelling_only_a_queued_one(store):
    store.record_command(_cmd("spot-1"), ttl_seconds=3600, now=utcnow() - timedelta(minutes=5))
    store.record_command(_cmd("spot-2"), ttl_seconds=3600)
    assert [i["command"]["command_id"] for i in commands_for_instance(store, "i-0123456789abcdef0")] == [
        "spot-2",
        "spot-1",
    ]
    assert commands_for_instance(store, "i-0123456789abcdef0", CommandKind.CORDON) == []
    assert cancel_queued_command(store, "spot-2", "instance terminating") is True
    assert store.get_command("spot-2")["status"] == CommandStatus.SKIPPED.value
    assert cancel_queued_command(store, "spot-2", "again") is False


def test_record_and_send_sends_again_only_while_queued(store):
    sent: list[str] = []

    def send(command: Command) -> str:
        sent.append(command.command_id)
        return f"m-{len(sent)}"

    now = utcnow()
    assert record_and_send(store, send, _cmd(), 3600, now) == Delivery(message_id="m-1", previous_status=None)
    assert record_and_send(store, send, _cmd(), 3600, now) == Delivery(message_id="m-2", previous_status="queued")
    store.start_command(_cmd(), "agent-a", stale_after_seconds=60, ttl_seconds=3600)
    delivery = record_and_send(store, send, _cmd(), 3600, now)
    assert not delivery.sent and delivery.previous_status == "running" and sent == ["spot-1", "spot-1"]


def test_record_and_send_sends_the_recorded_command_again_not_a_recomputed_one(store):
    sent: list[Command] = []

    def send(command: Command) -> str:
        sent.append(command)
        return "m"

    first = _cmd()
    record_and_send(store, send, first, 3600, utcnow())
    later = first.model_copy(update={"deadline": first.deadline + timedelta(minutes=5)})  # a retry recomputes it
    assert record_and_send(store, send, later, 3600, utcnow()).sent
    assert sent == [first, first]  # what the agent will find in the item


def test_mark_reported_only_while_the_status_holds(store):
    store.record_command(_cmd(), ttl_seconds=3600)
    attempt = store.start_command(_cmd(), "agent-a", stale_after_seconds=60, ttl_seconds=3600)
    store.finish_command("spot-1", "agent-a", attempt, CommandStatus.SUCCEEDED, {"message": "ok"})
    store.mark_reported("spot-1", CommandStatus.SUCCEEDED)
    assert "reported_at" in store.get_command("spot-1")
    with pytest.raises(Exception, match="update CMD#spot-1"):
        store.mark_reported("spot-1", CommandStatus.FAILED)


def test_a_deadline_is_tightened_only_forward_and_only_while_the_command_is_active(store):
    from adapters.dynamo.commands import tighten_deadline

    store.record_command(_cmd("rebalance-1"), ttl_seconds=3600)
    soon = utcnow() + timedelta(seconds=60)
    assert tighten_deadline(store, "rebalance-1", soon, by="spot-1")
    assert tighten_deadline(store, "rebalance-1", soon, by="spot-1")  # the same again: a redelivered event
    assert not tighten_deadline(store, "rebalance-1", soon + timedelta(seconds=30), by="spot-2")  # never later
    item = store.get_command("rebalance-1")
    assert item["deadline_tightened_to"] == soon.isoformat() and item["tightened_by"] == "spot-1"
    assert "deadline_tightened_to" not in item["command"]  # the recorded command stays as the agent binds it
    started = store.start_command(_cmd("rebalance-1"), "agent-a", stale_after_seconds=60, ttl_seconds=3600)
    assert tighten_deadline(store, "rebalance-1", soon - timedelta(seconds=10), by="spot-3")  # running: still
    store.finish_command("rebalance-1", "agent-a", started, CommandStatus.SUCCEEDED, {})
    assert not tighten_deadline(store, "rebalance-1", soon - timedelta(seconds=20), by="spot-4")  # ended
    assert not tighten_deadline(store, "nothing-recorded", soon, by="spot-5")


def test_the_first_resolution_of_a_cordon_wins_but_the_releaser_replaces_its_own_claim(store):
    from adapters.dynamo.commands import resolve_cordon

    store.record_command(_cmd("rebalance-1"), ttl_seconds=3600)
    assert resolve_cordon(store, "rebalance-1", "releasing", over="releasing")
    assert not resolve_cordon(store, "rebalance-1", "escalated by spot-1")  # the Lambda loses to the claim
    assert resolve_cordon(store, "rebalance-1", "released", over="releasing")
    assert not resolve_cordon(store, "rebalance-1", "released again", over="releasing")
    assert store.get_command("rebalance-1")["resolution"] == "released"
    assert not resolve_cordon(store, "nothing-recorded", "x")


def test_record_and_send_fenced_by_a_lost_lease_records_and_sends_nothing(store):
    from adapters.dynamo.lock import LeaseLock
    from core.exceptions import LockLostError

    sent: list[str] = []

    def send(command: Command) -> str:
        sent.append(command.command_id)
        return "m-1"

    old = LeaseLock(store, clock=lambda: 1000.0).acquire("replenisher:a", "replenish", 10)
    LeaseLock(store, clock=lambda: 2000.0).acquire("refresher:r", "refresh", 10)
    with pytest.raises(LockLostError):
        record_and_send(store, send, _cmd("giveback-1"), 3600, utcnow(), fence=old)
    assert store.get_command("giveback-1") is None and sent == []
    store.record_command(_cmd("giveback-2"), ttl_seconds=3600)  # recorded before the lock changed hands
    with pytest.raises(LockLostError):
        record_and_send(store, send, _cmd("giveback-2"), 3600, utcnow(), fence=old)
    assert sent == []


def test_record_and_send_fenced_by_the_current_lease_records_and_sends(store):
    from adapters.dynamo.lock import LeaseLock

    lease = LeaseLock(store, clock=lambda: 1000.0).acquire("replenisher:a", "replenish", 10)
    delivery = record_and_send(store, lambda c: "m-1", _cmd("giveback-1"), 3600, utcnow(), fence=lease)
    assert delivery.sent and store.get_command("giveback-1")["status"] == "queued"
    again = record_and_send(store, lambda c: "m-2", _cmd("giveback-1"), 3600, utcnow(), fence=lease)
    assert again == Delivery(message_id="m-2", previous_status="queued")


@pytest.mark.parametrize("since", ["taken over", "beat", "finished"])
def test_an_abandoned_command_is_not_ended_once_its_item_moved_since_it_was_read(store, since):
    # the releaser read it stale; a worker then took it over, beat (a live worker whose heartbeats the table had
    # refused), or wrote its own end: the conditional end loses, and that worker's state stands
    store.record_command(_cmd(), ttl_seconds=3600)
    start = utcnow() - timedelta(seconds=300)
    attempt = store.start_command(_cmd(), "agent-a", stale_after_seconds=60, ttl_seconds=3600, now=start)
    [read] = store.query_prefix("CMD#spot-1", consistent=True, convert=False)  # table values, as the releaser
    if since == "taken over":
        store.start_command(_cmd(), "agent-b", stale_after_seconds=60, ttl_seconds=3600)
    elif since == "beat":
        store.heartbeat_command("spot-1", "agent-a", attempt)
    else:
        store.finish_command("spot-1", "agent-a", attempt, CommandStatus.SUCCEEDED, {"message": "drained"})
    before = store.get_command("spot-1")
    assert not end_abandoned_command(store, "spot-1", read, start, "abandoned")
    assert store.get_command("spot-1") == before


def test_an_abandoned_command_is_ended_timed_out_as_of_its_workers_last_heartbeat(store):
    store.record_command(_cmd(), ttl_seconds=3600)
    start = utcnow() - timedelta(seconds=300)
    store.start_command(_cmd(), "agent-a", stale_after_seconds=60, ttl_seconds=3600, now=start)
    [read] = store.query_prefix("CMD#spot-1", consistent=True, convert=False)  # table values, as the releaser
    assert end_abandoned_command(store, "spot-1", read, start, "abandoned")
    item = store.get_command("spot-1")
    assert item["status"] == "timed_out" and item["finished_at"] == start.isoformat()
    assert item["result"]["message"] == "abandoned"
    assert not end_abandoned_command(store, "spot-1", read, start, "abandoned")  # once
