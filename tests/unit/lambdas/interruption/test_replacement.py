"""Starting and joining a replacement run under the cluster lock (moto's DynamoDB), and the executor keeping the
rebalance cordon when a replacement is refused."""

from __future__ import annotations

from datetime import timedelta

import pytest

from adapters.dynamo.lock import LeaseLock
from adapters.dynamo.runs import RunStore
from core.runs import LOCK_OPERATION, GroupSurge, RunStatus, RunStep, StepState
from lambdas.interruption.decide import Plan
from lambdas.interruption.execute import Effects, execute
from lambdas.interruption.plan import JoinReplacement, RecordCommand, SendCommand, StartReplacement
from lambdas.interruption.replacement import LEASE_SECONDS, join_replacement, start_replacement
from tests.unit.lambdas.interruption.effects_world import NOW, messages
from tests.unit.lambdas.interruption.replacement_world import GROUP, VICTIM, cordon, run


def lock_holder(effects: Effects) -> str | None:
    return (LeaseLock(effects.store).current() or {}).get("holder")


def test_a_run_is_written_under_the_lock_and_the_lock_given_back(effects: Effects) -> None:
    started, what = start_replacement(StartReplacement(run()), effects.store, NOW)
    assert started, what
    stored = RunStore(effects.store).active()
    assert stored is not None and stored.run_id == run().run_id and stored.steps[0].instance_id == "i-1"
    assert lock_holder(effects) is None
    assert int((LeaseLock(effects.store).current() or {})["fencing"]) == 1  # it was taken (fenced write) once


def test_a_lock_held_by_another_operation_starts_nothing(effects: Effects) -> None:
    LeaseLock(effects.store, clock=NOW.timestamp).acquire("replenisher", "replenish", 120)
    started, what = start_replacement(StartReplacement(run()), effects.store, NOW)
    assert not started and "held by replenisher" in what
    assert RunStore(effects.store).list() == []
    assert lock_holder(effects) == "replenisher"  # not released by the refused start


def test_an_expired_lease_is_taken_over(effects: Effects) -> None:
    LeaseLock(effects.store, clock=NOW.timestamp).acquire("replenisher", "replenish", 10)
    later = NOW + timedelta(seconds=LEASE_SECONDS)
    started, _ = start_replacement(StartReplacement(run()), effects.store, later)
    assert started


def test_another_active_run_starts_nothing(effects: Effects) -> None:
    RunStore(effects.store).create(run("20240305T090000Z-000000", "i-9", trigger="schedule"))
    started, what = start_replacement(StartReplacement(run()), effects.store, NOW)
    assert not started and "20240305T090000Z-000000 (schedule) is active" in what
    assert [r.run_id for r in RunStore(effects.store).list()] == ["20240305T090000Z-000000"]
    assert lock_holder(effects) is None


def test_a_duplicate_delivery_writes_the_run_once(effects: Effects) -> None:
    assert start_replacement(StartReplacement(run()), effects.store, NOW)[0]
    started, what = start_replacement(StartReplacement(run()), effects.store, NOW + timedelta(seconds=5))
    assert not started and "earlier delivery" in what
    finished = RunStore(effects.store).active()
    assert finished is not None
    RunStore(effects.store).save(finished.model_copy(update={"status": RunStatus.SUCCEEDED}))
    started, what = start_replacement(StartReplacement(run()), effects.store, NOW + timedelta(minutes=5))
    assert not started and "already recorded" in what  # the same event after its run ended: nothing again


def join(instance: str, limit: int = 2, group: GroupSurge | None = None) -> JoinReplacement:
    step = RunStep(index=0, group=(group or GROUP).name, role="node", instance_id=instance)
    return JoinReplacement(run().run_id, step, group, limit)


def test_an_instance_joins_the_replacement_run_up_to_the_limit(effects: Effects) -> None:
    RunStore(effects.store).create(run())
    other = GroupSurge(name="nodes-b", role="node", min_size=1, original_desired=2, original_max=3)
    joined, what = join_replacement(join("i-2", group=other), effects.store, NOW)
    assert joined, what
    stored = RunStore(effects.store).get(run().run_id)
    assert stored is not None
    assert [(s.index, s.instance_id, s.group, s.state) for s in stored.steps] == [
        (0, "i-1", "nodes", StepState.PENDING),
        (1, "i-2", "nodes-b", StepState.PENDING),
    ]
    assert [g.name for g in stored.groups] == ["nodes", "nodes-b"] and stored.version == 1
    joined, what = join_replacement(join("i-3"), effects.store, NOW)
    assert not joined and "limit 2" in what
    joined, what = join_replacement(join("i-2", limit=5), effects.store, NOW)
    assert not joined and "already in run" in what
    assert lock_holder(effects) is None


def test_a_run_that_is_stopping_takes_no_one(effects: Effects) -> None:
    RunStore(effects.store).create(run().model_copy(update={"status": RunStatus.PAUSING}))
    joined, what = join_replacement(join("i-2"), effects.store, NOW)
    assert not joined and "pausing" in what


@pytest.mark.parametrize("held", [False, True])
def test_the_executor_keeps_the_cordon_whether_the_replacement_starts_or_not(effects: Effects, held: bool) -> None:
    if held:
        LeaseLock(effects.store, clock=NOW.timestamp).acquire("refresher:other", LOCK_OPERATION, 120)
    plan = Plan((StartReplacement(run()), RecordCommand(cordon(VICTIM)), SendCommand(cordon(VICTIM))))
    results = execute(plan, effects, NOW)
    assert results[0]["result"].startswith("not started" if held else "started run")
    assert (RunStore(effects.store).active() is None) is held
    assert effects.store.get_command("rebalance-ev") is not None and len(messages(effects)) == 1


def test_dry_run_starts_nothing(effects: Effects) -> None:
    results = execute(Plan((StartReplacement(run()),)), effects, NOW, dry_run=True)
    assert len(results) == 1 and RunStore(effects.store).list() == []
    assert LeaseLock(effects.store).current() is None
