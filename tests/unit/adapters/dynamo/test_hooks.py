"""``HOOK#`` items and the one way to finish a lifecycle action (moto's DynamoDB; Auto Scaling faked)."""

from datetime import timedelta

import pytest

from adapters.dynamo.hooks import Finish, action_of, claim_hook, finish, get_hook, record_hook
from adapters.dynamo.store import Store
from core.exceptions import AwsUnavailableError
from core.lifecycle import CLAIM_EXPIRY_SECONDS, HookState, LifecycleAction, claimable
from core.model import utcnow

ACTION = LifecycleAction(
    instance_id="i-0123456789abcdef0", asg_name="nodes", hook_name="drain", token="t-1", event_id="ev-1"
)


def test_an_action_is_recorded_once_and_a_newer_one_replaces_it(store: Store) -> None:
    assert record_hook(store, ACTION, ttl_seconds=3600) is True
    assert record_hook(store, ACTION, ttl_seconds=3600) is False
    newer = ACTION.model_copy(update={"token": "t-2"})
    assert record_hook(store, newer, ttl_seconds=3600) is True
    item = get_hook(store, ACTION.instance_id)
    assert item is not None and item["state"] == HookState.PENDING and action_of(item) == newer


def test_only_one_finisher_completes(store: Store) -> None:
    record_hook(store, ACTION, ttl_seconds=3600)
    calls: list[LifecycleAction] = []

    def complete(action: LifecycleAction) -> bool:
        calls.append(action)
        return True

    assert finish(store, ACTION, "lambda", complete) is Finish.COMPLETED
    assert finish(store, ACTION, "agent", complete) is Finish.CLAIMED_ELSEWHERE
    item = get_hook(store, ACTION.instance_id)
    assert calls == [ACTION] and item is not None and item["state"] == "completed" and item["claimed_by"] == "lambda"


def test_a_gone_action_is_recorded_and_a_failed_call_puts_the_claim_back(store: Store) -> None:
    record_hook(store, ACTION, ttl_seconds=3600)

    def throttled(action: LifecycleAction) -> bool:
        raise AwsUnavailableError("CompleteLifecycleAction", "Throttling")

    with pytest.raises(AwsUnavailableError):
        finish(store, ACTION, "agent", throttled)
    assert get_hook(store, ACTION.instance_id)["state"] == "pending"
    assert finish(store, ACTION, "agent", lambda action: False) is Finish.GONE
    assert get_hook(store, ACTION.instance_id)["state"] == "gone"


def test_a_claim_whose_finisher_died_expires_and_is_taken_over(store: Store) -> None:
    """A finisher that claimed the action and died (or could not write the end) leaves ``completing``: live, it
    keeps others off; after ``CLAIM_EXPIRY_SECONDS`` the next finisher takes it over."""
    record_hook(store, ACTION, ttl_seconds=3600)
    t0 = utcnow()
    assert claim_hook(store, ACTION.instance_id, ACTION.token, "agent-dead", now=t0)
    live = t0 + timedelta(seconds=CLAIM_EXPIRY_SECONDS - 5)
    assert finish(store, ACTION, "agent-b", lambda a: True, now=live) is Finish.CLAIMED_ELSEWHERE
    item = get_hook(store, ACTION.instance_id)
    assert item is not None and not claimable(item, live.timestamp())
    later = t0 + timedelta(seconds=CLAIM_EXPIRY_SECONDS + 5)
    assert claimable(item, later.timestamp())
    assert finish(store, ACTION, "agent-b", lambda a: True, now=later) is Finish.COMPLETED
    item = get_hook(store, ACTION.instance_id)
    assert item is not None and item["state"] == "completed" and item["claimed_by"] == "agent-b"
