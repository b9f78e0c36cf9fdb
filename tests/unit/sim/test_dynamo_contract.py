"""Contract: the product's table adapters (Store, LeaseLock, RunStore, the ledger, hooks, detach, membership) get
the same answers and the same exceptions from the simulation's in-memory DynamoDB as from moto's.

Every test runs on ``sim.dynamo.MemoryTable`` (with and without ``copy_reads``) and on a moto ``mock_aws`` table
(``core.schema``'s layout), with the same calls and the same expectations, so a difference fails one of them. Where
moto differs from DynamoDB as AWS documents it, the test says so and follows AWS (see ``test_dynamo.py`` for the raw
answers compared side by side).
"""

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from adapters.dynamo import ledger as ledger_store
from adapters.dynamo.command_delivery import record_and_send
from adapters.dynamo.commands import (
    cancel_queued_command,
    commands_for_instance,
    recording,
    resolve_cordon,
    tighten_deadline,
)
from adapters.dynamo.hooks import claim_hook, get_hook, record_hook, settle_hook
from adapters.dynamo.lock import LOCK_SK, LeaseLock
from adapters.dynamo.runs import RunStore
from adapters.dynamo.store import Store
from core.exceptions import (
    CommandExistsError,
    CommandTransitionError,
    LedgerConflictError,
    LockHeldError,
    LockLostError,
    RunConflictError,
)
from core.ledger import Backoff, Ledger
from core.lifecycle import HookState, LifecycleAction
from core.model import Command, CommandStatus, NodeRecord
from core.runs import GroupSurge, Run, RunOptions, RunStatus
from core.schema import state_table
from sim.dynamo import MemoryDynamo
from sim.faults import Faults
from sim.kernel import Kernel

T0 = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)
IA, IB, IC = "i-0aaaaaaaaaaaaaaaa", "i-0bbbbbbbbbbbbbbbb", "i-0cccccccccccccccc"


@pytest.fixture(params=["memory", "memory-shared-reads", "moto"])
def table(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A boto3-like ``dynamodb.Table``: the simulation's (reads copied, or shared as the fast setting does), or
    moto's."""
    if request.param.startswith("memory"):
        kernel = Kernel(seed=7)
        yield MemoryDynamo(kernel, Faults(kernel), copy_reads=request.param == "memory").table("state")
        return
    with mock_aws():
        ddb = boto3.resource("dynamodb", region_name="us-east-1")
        ddb.create_table(**state_table("state"))
        yield ddb.Table("state")


@pytest.fixture
def store(table: Any) -> Store:
    return Store(table, "demo")


def command(cid: str = "spot-1", instance: str = "i-0123456789abcdef0") -> Command:
    return Command(
        command_id=cid, cluster="demo", kind="drain", instance_id=instance, deadline=T0 + timedelta(minutes=2)
    )


def run(run_id: str = "20260105T100000Z-abcdef") -> Run:
    return Run(
        run_id=run_id,
        cluster="demo",
        options=RunOptions(),
        groups=[GroupSurge(name="nodes", role="node", min_size=1, original_desired=2, original_max=3, raised=1)],
        created_at=T0,
        updated_at=T0,
    )


# -- CMD# ---------------------------------------------------------------------------------------------------------


def test_command_transitions_are_conditional(store: Store) -> None:
    store.record_command(command(), ttl_seconds=3600, now=T0)
    with pytest.raises(CommandExistsError) as exists:
        store.record_command(command(), ttl_seconds=3600, now=T0)
    assert exists.value.current is not None and exists.value.current["status"] == "queued"
    assert exists.value.current["attempt"] == 0 and exists.value.current["command"]["command_id"] == "spot-1"

    assert store.start_command(command(), "agent-a", stale_after_seconds=60, ttl_seconds=3600, now=T0) == 1
    with pytest.raises(CommandTransitionError) as live:
        store.start_command(command(), "agent-b", stale_after_seconds=60, ttl_seconds=3600, now=T0)
    assert live.value.current is not None and live.value.current["worker"] == "agent-a"

    later = T0 + timedelta(seconds=30)
    item = store.heartbeat_command("spot-1", "agent-a", 1, progress={"evicted": 3, "left": ["a/b"]}, now=later)
    assert item["progress"] == {"evicted": 3, "left": ["a/b"]} and item["heartbeat_at"] == later.timestamp()
    with pytest.raises(CommandTransitionError) as wrong:
        store.heartbeat_command("spot-1", "agent-b", 1, now=later)
    assert wrong.value.current is not None and wrong.value.current["worker"] == "agent-a"

    stale = later + timedelta(seconds=61)  # agent-a's heartbeat is older than 60 s: agent-b takes over
    assert store.start_command(command(), "agent-b", stale_after_seconds=60, ttl_seconds=3600, now=stale) == 2
    with pytest.raises(CommandTransitionError):
        store.finish_command("spot-1", "agent-a", 1, CommandStatus.SUCCEEDED, {"pods": []}, now=stale)
    store.finish_command("spot-1", "agent-b", 2, CommandStatus.SUCCEEDED, {"pods": [], "n": 1.5}, now=stale)
    with pytest.raises(CommandTransitionError) as done:
        store.start_command(command(), "agent-c", stale_after_seconds=60, ttl_seconds=3600, now=stale)
    assert done.value.current is not None and done.value.current["status"] == "succeeded"
    final = store.get_command("spot-1")
    assert final is not None and final["result"] == {"pods": [], "n": 1.5} and final["attempt"] == 2


def test_a_command_never_recorded_is_not_started(store: Store) -> None:
    with pytest.raises(CommandTransitionError) as info:
        store.start_command(command("nope"), "agent-a", stale_after_seconds=60, ttl_seconds=3600, now=T0)
    assert info.value.current is None
    with pytest.raises(CommandTransitionError) as missing:
        store.heartbeat_command("nope", "agent-a", 1, now=T0)
    assert missing.value.current is None  # ALL_OLD of no item: no Item in the answer


def test_release_cancel_tighten_and_resolve(store: Store) -> None:
    store.record_command(command(), ttl_seconds=3600, now=T0)
    store.start_command(command(), "agent-a", stale_after_seconds=60, ttl_seconds=3600, now=T0)
    assert tighten_deadline(store, "spot-1", T0 + timedelta(seconds=90), "interruption", now=T0) is True
    assert tighten_deadline(store, "spot-1", T0 + timedelta(seconds=100), "late", now=T0) is False  # later: refused
    assert tighten_deadline(store, "spot-1", T0 + timedelta(seconds=90), "again", now=T0) is True  # same: accepted
    store.release_command("spot-1", "agent-a", 1, now=T0)
    item = store.get_command("spot-1")
    assert item is not None and item["status"] == "queued" and "worker" not in item and "heartbeat_at" not in item
    with pytest.raises(CommandTransitionError):
        store.release_command("spot-1", "agent-a", 1, now=T0)
    assert cancel_queued_command(store, "spot-1", "instance gone", now=T0) is True
    assert cancel_queued_command(store, "spot-1", "instance gone", now=T0) is False
    assert tighten_deadline(store, "spot-1", T0, "late", now=T0) is False  # skipped: neither queued nor running
    assert resolve_cordon(store, "spot-1", "releasing", now=T0) is True
    assert resolve_cordon(store, "spot-1", "uncordoned", now=T0) is False
    assert resolve_cordon(store, "spot-1", "uncordoned", now=T0, over="releasing") is True
    assert resolve_cordon(store, "missing", "uncordoned", now=T0) is False  # no item: pk does not exist
    store.mark_reported("spot-1", CommandStatus.SKIPPED, now=T0)
    with pytest.raises(CommandTransitionError.__mro__[1]):  # ConflictError: the status moved on
        store.mark_reported("spot-1", CommandStatus.RUNNING, now=T0)


def test_commands_of_an_instance_come_back_from_the_cmd_range(store: Store) -> None:
    for i, instance in enumerate([IA, IB, IA]):
        store.record_command(command(f"c-{i}", instance), ttl_seconds=3600, now=T0 + timedelta(seconds=i))
    store.put_node(NodeRecord(instance_id=IA, node_name="n-a", reported_at=T0), ttl_seconds=3600)
    found = commands_for_instance(store, IA)
    assert [c["command"]["command_id"] for c in found] == ["c-2", "c-0"]


def test_record_and_send_sends_again_only_while_queued(store: Store) -> None:
    sent: list[str] = []

    def send(c: Command) -> str:
        sent.append(c.command_id)
        return f"m-{len(sent)}"

    first = record_and_send(store, send, command(), 3600, T0)
    again = record_and_send(store, send, command(), 3600, T0)
    assert (first.message_id, first.previous_status, again.message_id, again.previous_status) == (
        "m-1",
        None,
        "m-2",
        "queued",
    )
    store.start_command(command(), "agent-a", stale_after_seconds=60, ttl_seconds=3600, now=T0)
    third = record_and_send(store, send, command(), 3600, T0)
    assert third.message_id is None and third.previous_status == "running" and sent == ["spot-1", "spot-1"]


# -- LOCK ---------------------------------------------------------------------------------------------------------


def test_the_lock_is_held_renewed_lost_and_released(store: Store) -> None:
    a = LeaseLock(store, clock=lambda: 1000.0).acquire("refresher:a", "refresh", 60)
    assert (a.fencing, a.expires_at) == (1, 1060.0)
    with pytest.raises(LockHeldError) as held:
        LeaseLock(store, clock=lambda: 1010.0).acquire("replenisher:b", "replenish", 60)
    assert held.value.current is not None and held.value.current["holder"] == "refresher:a"
    assert LeaseLock(store, clock=lambda: 1020.0).acquire("refresher:a", "refresh", 60).expires_at == 1080.0
    renewed = LeaseLock(store, clock=lambda: 1030.0).renew(a, 60)
    assert (renewed.fencing, renewed.expires_at) == (1, 1090.0)

    b = LeaseLock(store, clock=lambda: 1100.0).acquire("replenisher:b", "replenish", 60)  # a's lease expired
    assert b.fencing == 2
    with pytest.raises(LockLostError) as lost:
        LeaseLock(store, clock=lambda: 1101.0).renew(a, 60)
    assert lost.value.current is not None and lost.value.current["holder"] == "replenisher:b"
    LeaseLock(store, clock=lambda: 1102.0).release(a)  # lost already: nothing to give up, no error
    assert store.get(LOCK_SK)["holder"] == "replenisher:b"  # type: ignore[index]  # the lock item exists
    LeaseLock(store, clock=lambda: 1103.0).release(b)
    free = LeaseLock(store).current()
    assert free is not None and "holder" not in free and free["fencing"] == 2 and free["lease_expires_at"] == 0
    c = LeaseLock(store, clock=lambda: 1104.0).acquire("refresher:c", "refresh", 60)
    assert c.fencing == 3


def test_an_acquisition_on_a_stale_read_loses(store: Store) -> None:
    seen = store.get(LOCK_SK)
    assert seen is None
    LeaseLock(store, clock=lambda: 1000.0).acquire("refresher:a", "refresh", 60)
    with pytest.raises(LockHeldError) as info:
        LeaseLock(store, clock=lambda: 1000.0).acquire("replenisher:b", "replenish", 60, seen=seen, use_seen=True)
    assert info.value.current is not None and info.value.current["fencing"] == 1


def test_a_fenced_write_applies_only_under_the_current_lease(store: Store) -> None:
    lease = LeaseLock(store, clock=lambda: 1000.0).acquire("refresher:a", "refresh", 10)
    store.record_command(command("c-1"), ttl_seconds=3600, now=T0, fence=lease)
    with pytest.raises(CommandExistsError) as exists:  # the lock check passed, the item's own condition failed
        store.record_command(command("c-1"), ttl_seconds=3600, now=T0, fence=lease)
    assert exists.value.current is not None and exists.value.current["status"] == "queued"
    LeaseLock(store, clock=lambda: 2000.0).acquire("replenisher:b", "replenish", 10)
    with pytest.raises(LockLostError) as lost:  # the lock check fails first, whatever the item's condition does
        store.record_command(command("c-1"), ttl_seconds=3600, now=T0, fence=lease)
    assert lost.value.current is not None and lost.value.current["holder"] == "replenisher:b"
    with pytest.raises(LockLostError):
        store.record_command(command("c-2"), ttl_seconds=3600, now=T0, fence=lease)
    assert store.get_command("c-2") is None


def test_a_fence_without_a_lock_item_is_lost(store: Store) -> None:
    from core.lock import Lease

    with pytest.raises(LockLostError) as lost:
        store.record_command(command(), ttl_seconds=3600, now=T0, fence=Lease("x", "refresh", 1, 1000.0))
    assert lost.value.current is None and store.get_command("spot-1") is None


# -- RUN#, COMP# ---------------------------------------------------------------------------------------------------


def test_runs_are_versioned_and_fenced(store: Store) -> None:
    runs = RunStore(store)
    lease = LeaseLock(store, clock=lambda: 1000.0).acquire("refresher:r", "refresh", 10)
    runs.create(run(), fence=lease)
    with pytest.raises(RunConflictError):
        runs.create(run())
    first = runs.get(run().run_id)
    assert first is not None and first.version == 0 and first.groups[0].raised == 1
    saved = runs.save(first, fence=lease)
    assert saved.version == 1
    with pytest.raises(RunConflictError) as stale:
        runs.save(first, fence=lease)
    assert stale.value.current is not None and stale.value.current["version"] == 1
    assert runs.active() == saved and [r.run_id for r in runs.list()] == [run().run_id]

    LeaseLock(store, clock=lambda: 2000.0).acquire("replenisher:x", "replenish", 10)
    with pytest.raises(LockLostError):
        runs.save(saved.model_copy(update={"status": RunStatus.PAUSING}), fence=lease)
    with pytest.raises(LockLostError):  # a stale version too: the lost lock is what is reported
        runs.save(first, fence=lease)
    stored = runs.get(run().run_id)
    assert stored is not None and stored.version == 1 and stored.status is RunStatus.RUNNING
    runs.save(stored.model_copy(update={"status": RunStatus.CANCELLING}))  # unfenced: an operator's cancel
    assert runs.active() is not None and runs.active().status is RunStatus.CANCELLING  # type: ignore[union-attr]


def test_a_save_records_commands_in_its_transaction_and_names_the_one_that_exists(store: Store) -> None:
    """The refresher's drain pass: the lock's check, the ``RUN#`` save and ``CMD#`` puts in one TransactWriteItems
    (items in both partitions); the cancellation reasons tell a command recorded already from a stale version or a
    lost lease."""
    runs = RunStore(store)
    lease = LeaseLock(store, clock=lambda: 1000.0).acquire("refresher:r", "refresh", 10)
    runs.create(run(), fence=lease)
    first = runs.get(run().run_id)
    assert first is not None
    drains = [recording(command("refresh-r-0", IA), 3600, T0), recording(command("refresh-r-1", IB), 3600, T0)]
    saved = runs.save(first, fence=lease, also=drains)
    assert saved.version == 1 and [
        (store.get_command(c) or {}).get("status") for c in ("refresh-r-0", "refresh-r-1")
    ] == [
        "queued",
        "queued",
    ]
    again = [recording(command("refresh-r-2", IC), 3600, T0), drains[1]]
    with pytest.raises(CommandExistsError) as exists:
        runs.save(saved, fence=lease, also=again)
    assert exists.value.current is not None and exists.value.current["sk"] == "CMD#refresh-r-1"
    assert store.get_command("refresh-r-2") is None and (runs.get(run().run_id) or first).version == 1
    with pytest.raises(RunConflictError):
        runs.save(first, fence=lease, also=again)
    LeaseLock(store, clock=lambda: 2000.0).acquire("replenisher:x", "replenish", 10)
    with pytest.raises(LockLostError):
        runs.save(saved, fence=lease, also=again)
    assert store.get_command("refresh-r-2") is None and (runs.get(run().run_id) or first).version == 1


def test_ledger_writes_are_versioned_and_fenced(store: Store) -> None:
    first = ledger_store.write(store, Ledger(asg_name="nodes-a"), None, T0)
    assert first.version == 1
    with pytest.raises(LedgerConflictError) as exists:
        ledger_store.write(store, Ledger(asg_name="nodes-a"), None, T0)
    assert exists.value.current is not None and exists.value.current["version"] == 1
    lease = LeaseLock(store, clock=lambda: 1000.0).acquire("replenisher:a", "replenish", 10)
    second = ledger_store.write(store, first.model_copy(update={"backoff": Backoff(window_seconds=300)}), 1, T0, lease)
    with pytest.raises(LedgerConflictError):
        ledger_store.write(store, first, 1, T0, fence=lease)
    LeaseLock(store, clock=lambda: 2000.0).acquire("refresher:r", "refresh", 10)
    with pytest.raises(LockLostError):
        ledger_store.write(store, second, 2, T0, fence=lease)
    item = store.get(ledger_store.ledger_sk("nodes-a"))
    assert item is not None and ledger_store.from_item(item) == second


# -- HOOK#, DETACH#, NODE#, queries -------------------------------------------------------------------------------


def test_hooks_are_recorded_once_and_claimed_once(store: Store) -> None:
    action = LifecycleAction(instance_id="i-1", asg_name="nodes", hook_name="drain", token="t-1", event_id="e-1")
    assert record_hook(store, action, 3600, now=T0) is True
    assert record_hook(store, action, 3600, now=T0) is False
    assert claim_hook(store, "i-1", "t-1", "agent", now=T0) is True
    assert claim_hook(store, "i-1", "t-1", "lambda", now=T0) is False
    assert claim_hook(store, "i-1", "t-1", "lambda", now=T0 + timedelta(hours=1)) is True  # the claim expired
    settle_hook(store, "i-1", "t-1", HookState.COMPLETED, "", now=T0)
    item = get_hook(store, "i-1")
    assert item is not None and item["state"] == "completed" and "detail" not in item


def test_detach_is_recorded_once(store: Store) -> None:
    assert store.record_detach("i-1", "nodes", "rebalance", 3600, now=T0) is True
    assert store.record_detach("i-1", "nodes", "rebalance", 3600, now=T0) is False
    store.mark_detached("i-1", "detached", now=T0)
    assert store.get_detach("i-1")["state"] == "detached"  # type: ignore[index]  # recorded above


def test_membership_and_partition_queries_in_sort_key_order(store: Store) -> None:
    for instance in [IC, IA, IB]:
        store.put_node(NodeRecord(instance_id=instance, node_name=f"node-{instance[-1]}", reported_at=T0), 3600)
    store.put_membership_mark(T0, 3, 3600)
    store.record_command(command(), 3600, now=T0)
    assert [n.instance_id for n in store.recorded_nodes()] == [IA, IB, IC]
    assert [n.instance_id for n in store.list_nodes(60, now=T0 + timedelta(seconds=30))] == [IA, IB, IC]
    assert store.membership_mark() == T0
    store.delete_node(IB)
    store.delete_node(IB)  # deleting an absent item is not an error
    sks = [item["sk"] for item in store.query_partition()]
    # the command's pointers and the index mark (``adapters.dynamo.command_index``) sort in
    pointer = "ICMD#i-0123456789abcdef0#spot-1"
    assert sks == ["CMD#spot-1", "ICMD#", pointer, "MEMBERSHIP", f"NODE#{IA}", f"NODE#{IC}", "OCMD#spot-1"]
    assert list(Store(store.table, "other").query_partition()) == []
