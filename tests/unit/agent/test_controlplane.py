"""The cluster-wide control-plane drain cap (``agent.controlplane.TableControlPlaneGuard``) on moto's DynamoDB: two
agent processes share the cluster's slots, a refused command claims nothing, a slot expires with its drain's deadline
(capped by MAX_COMMAND_SECONDS), a release that fails is counted and the slot still expires."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

import boto3
import pytest
from moto import mock_aws

from adapters.dynamo.controlplane import PREFIX, ControlPlaneSlots, SlotClaim
from adapters.dynamo.store import Store
from agent.controlplane import TableControlPlaneGuard
from agent.kube.views import NodeView
from core.exceptions import ControlPlaneBusyError, ControlPlaneRefusedError, StoreUnavailableError
from core.model import Command, CommandKind, to_epoch, utcnow
from core.schema import state_table

MASTER = NodeView(
    name="m1", provider_id="aws:///us-east-1a/i-0123456789abcdef0", labels={"node-role.kubernetes.io/master": ""}
)


@pytest.fixture
def store() -> Iterator[Store]:
    with mock_aws():
        ddb = boto3.resource("dynamodb", region_name="us-east-1")
        ddb.create_table(**state_table("state"))
        yield Store(ddb.Table("state"), "demo")


def drain(command_id: str, reason: str = "asg-lifecycle:masters-a", seconds: float = 120) -> Command:
    return Command(
        command_id=command_id,
        cluster="demo",
        kind=CommandKind.DRAIN,
        instance_id="i-0123456789abcdef0",
        reason=reason,
        deadline=utcnow() + timedelta(seconds=seconds),
    )


def guard(store: Store, worker: str, limit: int = 1, max_seconds: int = 3600) -> TableControlPlaneGuard:
    return TableControlPlaneGuard(ControlPlaneSlots(store), limit, worker, max_seconds)


def test_two_agents_share_the_clusters_slot(store: Store) -> None:
    leader, standby = guard(store, "agent-a:1"), guard(store, "agent-b:2")
    leader.admit(drain("refresh-r1-0", "refresh r1 step 0"), MASTER)
    with pytest.raises(ControlPlaneBusyError) as busy:
        standby.admit(drain("lifecycle-ev-1"), MASTER)
    assert busy.value.holders == ["refresh-r1-0"]
    standby.release("lifecycle-ev-1")  # holds nothing: the leader's slot stays
    assert [i["command_id"] for i in store.query_prefix(PREFIX, consistent=True)] == ["refresh-r1-0"]
    leader.release("refresh-r1-0")
    standby.admit(drain("lifecycle-ev-1"), MASTER)


def test_an_item_under_the_slots_prefix_that_is_no_slot_neither_fails_nor_holds_a_drain(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    store.put(f"{PREFIX}x", {"command_id": "nobody"})  # e.g. written by hand, or by anything allowed to write the table
    guard(store, "agent-a:1").admit(drain("lifecycle-ev-1"), MASTER)  # a slot taken, no ValueError
    assert store.get(f"{PREFIX}0") is not None
    assert f"{PREFIX}x" in caplog.text  # logged
    with pytest.raises(ControlPlaneBusyError):  # the cap still holds
        guard(store, "agent-b:2").admit(drain("lifecycle-ev-2"), MASTER)


def test_a_refused_command_claims_nothing(store: Store) -> None:
    with pytest.raises(ControlPlaneRefusedError):
        guard(store, "agent-a:1").admit(drain("rebalance-1", "rebalance-recommendation"), MASTER)
    assert list(store.query_prefix(PREFIX, consistent=True)) == []


def test_a_slot_expires_at_the_drains_deadline_capped_by_max_command_seconds(store: Store) -> None:
    near = drain("spot-1", "spot-interruption:terminate", seconds=120)
    guard(store, "agent-a:1").admit(near, MASTER)
    [item] = store.query_prefix(PREFIX, consistent=True)
    assert item["expires_at"] == to_epoch(near.deadline)
    guard(store, "agent-a:1").release("x")
    store.delete(item["sk"])
    far = drain("refresh-r1-0", "refresh r1 step 0", seconds=10 * 86400)
    before = utcnow()
    guard(store, "agent-a:1", max_seconds=600).admit(far, MASTER)
    [item] = store.query_prefix(PREFIX, consistent=True)
    assert to_epoch(before) + 599 <= item["expires_at"] <= to_epoch(utcnow()) + 601


class Broken:
    """Slots whose table is down."""

    def claim(self, *args: object) -> SlotClaim:
        raise StoreUnavailableError("throttled")

    def release(self, command_id: str, worker: str | None = None) -> int:
        raise StoreUnavailableError("throttled")


def test_a_table_down_is_retryable_and_a_failed_release_is_counted(store: Store) -> None:
    errors: list[BaseException] = []
    down = TableControlPlaneGuard(Broken(), 1, "agent-a:1", 3600, on_error=errors.append)
    with pytest.raises(StoreUnavailableError):
        down.admit(drain("spot-1", "spot-interruption:terminate"), MASTER)
    ok = TableControlPlaneGuard(ControlPlaneSlots(store), 1, "agent-a:1", 3600, on_error=errors.append)
    ok.admit(drain("spot-1", "spot-interruption:terminate"), MASTER)
    ok.slots = Broken()
    ok.release("spot-1")  # never raises
    assert [type(e).__name__ for e in errors] == ["StoreUnavailableError"]


def test_the_clock_is_the_guards(store: Store) -> None:
    at = utcnow() + timedelta(hours=1)

    def clock() -> datetime:
        return at

    late = TableControlPlaneGuard(ControlPlaneSlots(store), 1, "agent-a:1", 60, clock=clock)
    late.admit(drain("spot-1", "spot-interruption:terminate", seconds=7200), MASTER)
    [item] = store.query_prefix(PREFIX, consistent=True)
    assert item["expires_at"] == to_epoch(at + timedelta(seconds=60))


def test_a_worker_that_lost_its_drain_leaves_the_slot_its_next_worker_took_over(store: Store) -> None:
    # agent-a's heartbeat went stale (throttled table, a long pause), agent-b took the master's drain over and
    # claimed the same slot (same command id); agent-a's drain then ends (``DrainEngine.run`` releases its slot):
    # agent-b still drains that master, so no second master drain may start (MAX_CONTROL_PLANE_DRAINS=1)
    first, second = guard(store, "agent-a:1"), guard(store, "agent-b:2")
    taken_over = drain("lifecycle-ev-1")
    first.admit(taken_over, MASTER)
    second.admit(taken_over, MASTER)
    first.release(taken_over.command_id)
    assert [i["worker"] for i in store.query_prefix(PREFIX, consistent=True)] == ["agent-b:2"]
    with pytest.raises(ControlPlaneBusyError):
        guard(store, "agent-c:3").admit(drain("refresh-r1-0", "refresh r1 step 0"), MASTER)
    second.release(taken_over.command_id)  # its own end gives the slot back
    assert list(store.query_prefix(PREFIX, consistent=True)) == []


def test_a_release_the_table_refused_is_tried_again_by_the_next_release(store: Store) -> None:
    # DrainEngine.run gives the slot back as the drain ends, the consumer again as it finishes the command: when the
    # table throttled the first, the second still gives it back (else the masters wait for the slot's expiry)
    guard_a = TableControlPlaneGuard(ControlPlaneSlots(store), 1, "agent-a:1", 3600, on_error=lambda err: None)
    guard_a.admit(drain("spot-1", "spot-interruption:terminate"), MASTER)
    table = guard_a.slots
    guard_a.slots = Broken()
    guard_a.release("spot-1")  # refused
    guard_a.slots = table
    guard_a.release("spot-1")
    assert list(store.query_prefix(PREFIX, consistent=True)) == []
