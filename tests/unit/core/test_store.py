"""The table store's conditional transitions, on moto's DynamoDB."""

from datetime import timedelta

import boto3
import pytest
from moto import mock_aws

from adapters.dynamo.store import Store
from core.exceptions import CommandExistsError, CommandTransitionError
from core.model import Command, CommandStatus, NodeRecord, utcnow
from core.schema import state_table


@pytest.fixture
def store():
    with mock_aws():
        ddb = boto3.resource("dynamodb", region_name="us-east-1")
        ddb.create_table(**state_table("state"))
        yield Store(ddb.Table("state"), "demo")


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


def test_a_command_without_a_record_can_start(store):
    assert store.start_command(_cmd("manual-1"), "agent-a", stale_after_seconds=60, ttl_seconds=3600) == 1


def test_finish_needs_a_terminal_status(store):
    with pytest.raises(ValueError):
        store.finish_command("spot-1", "agent-a", 1, CommandStatus.RUNNING, {})


def test_membership_freshness_is_checked_by_the_reader(store):
    now = utcnow()
    store.put_node(NodeRecord(instance_id="i-0123456789abcdef0", node_name="a", reported_at=now), ttl_seconds=600)
    store.put_node(
        NodeRecord(instance_id="i-0123456789abcdef1", node_name="b", reported_at=now - timedelta(hours=2)),
        ttl_seconds=600,
    )
    # The stale item is still in the table (TTL deletion lags), but readers skip it.
    assert store.get("NODE#i-0123456789abcdef1") is not None
    assert [r.node_name for r in store.list_nodes(max_age_seconds=600, now=now)] == ["a"]
    assert store.get_node("i-0123456789abcdef1", max_age_seconds=600, now=now) is None
    assert store.get_node("i-0123456789abcdef0", max_age_seconds=600, now=now).node_name == "a"


def test_detach_intent_is_recorded_once(store):
    assert store.record_detach("i-0123456789abcdef0", "nodes-a", "spot", ttl_seconds=3600) is True
    assert store.record_detach("i-0123456789abcdef0", "nodes-a", "spot", ttl_seconds=3600) is False
    store.mark_detached("i-0123456789abcdef0", "detached")
    assert store.get_detach("i-0123456789abcdef0")["state"] == "detached"


def test_a_released_command_is_started_again_with_the_next_attempt(store):
    store.record_command(_cmd(), ttl_seconds=3600)
    first = store.start_command(_cmd(), "agent-a", stale_after_seconds=60, ttl_seconds=3600)
    store.release_command("spot-1", "agent-a", first)
    assert store.get_command("spot-1")["status"] == "queued"
    # Not stale, yet another worker may take it at once, and the old worker can no longer finish it.
    assert store.start_command(_cmd(), "agent-b", stale_after_seconds=60, ttl_seconds=3600) == first + 1
    with pytest.raises(CommandTransitionError):
        store.release_command("spot-1", "agent-a", first)
