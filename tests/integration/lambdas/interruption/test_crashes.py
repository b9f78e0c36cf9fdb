"""The interruption Lambda end to end against moto (in process), when it fails part way: a crash between the record
and the detach is completed by the redelivered event, an intent recorded for an instance already detached is only
marked, and a dry run changes nothing (``world.py`` is the test world; ``test_handler.py`` the paths that work).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from core.exceptions import AwsUnavailableError, RetryableError
from core.model import Command
from lambdas.interruption.handler import handle
from tests.integration.lambdas.interruption.world import (
    NODES,
    T0,
    assert_nothing_changed,
    event,
)

pytestmark = pytest.mark.filterwarnings(
    # handle() is called without a Lambda context here; lambda_handler registers it in production.
    "ignore:Couldn't determine the remaining time left"
)


# -- crashes and transient faults ---------------------------------------------------------------------------


class DetachFailsOnce:
    """The real (moto) Auto Scaling client, whose first DetachInstances is throttled: a crash after the
    DETACH# intent was recorded and before the instance was detached."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.failures = 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def detach_instances(self, **kwargs: Any) -> Any:
        if self.failures:
            self.failures -= 1
            raise ClientError(
                {
                    "Error": {"Code": "Throttling", "Message": "Rate exceeded"},
                    "ResponseMetadata": {"HTTPStatusCode": 400},
                },
                "DetachInstances",
            )
        return self._client.detach_instances(**kwargs)


def test_crash_between_record_and_detach_is_completed_by_the_redelivered_event(world):
    victim = world.members(NODES)[0]
    raw = event("spot-interruption-warning.json", victim, event_id="ev-crash")
    desired = world.group(NODES)["DesiredCapacity"]

    with pytest.raises(AwsUnavailableError) as info:
        handle(raw, world.deps(autoscaling=DetachFailsOnce(world.autoscaling)), now=T0 + timedelta(seconds=2))
    assert isinstance(info.value, RetryableError)
    assert world.detaches()[0]["state"] == "intended"
    assert victim in world.members(NODES)
    assert world.dynamodb.Table("idempotency").scan()["Items"] == []  # the failed run left no idempotency record

    response = handle(raw, world.deps(), now=T0 + timedelta(seconds=40))  # Lambda's retry

    assert response["status"] == "acted"
    assert victim not in world.members(NODES)
    assert world.group(NODES)["DesiredCapacity"] == desired
    [detach] = world.detaches()
    assert detach["state"] == "detached"
    assert len(world.commands()) == 1
    bodies = {Command.model_validate_json(m["Body"]).command_id for m in world.messages()}
    assert bodies == {"spot-ev-crash"}  # sent, and re-sent because it was still queued


def test_intent_recorded_but_instance_already_detached_is_only_marked(world):
    """A crash after DetachInstances but before the mark: the instance is out of its group already."""
    victim = world.members(NODES)[0]
    world.store.record_detach(victim, NODES, "spot-interruption:ev-x", ttl_seconds=3600)
    world.autoscaling.detach_instances(
        InstanceIds=[victim], AutoScalingGroupName=NODES, ShouldDecrementDesiredCapacity=False
    )
    members = world.members(NODES)

    response = handle(
        event("spot-interruption-warning.json", victim, event_id="ev-x"), world.deps(), now=T0 + timedelta(seconds=20)
    )

    assert response["status"] == "acted"
    assert world.members(NODES) == members
    assert world.detaches()[0]["state"] == "detached"
    [message] = world.messages()
    assert Command.model_validate_json(message["Body"]).instance_id == victim


def test_dry_run_changes_nothing(world):
    groups = {NODES: world.members(NODES)}
    victim = groups[NODES][0]

    response = handle(
        event("spot-interruption-warning.json", victim), world.deps(dry_run=True), now=T0 + timedelta(seconds=1)
    )

    assert response["status"] == "dry_run"
    assert [a["result"] for a in response["actions"]] == ["dry run: not done"] * 5
    assert_nothing_changed(world, groups)
