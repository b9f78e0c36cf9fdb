"""The refresher's pure decisions: the step state machine's redo rules.
Synthetic worlds (no I/O): what a crash leaves behind must lead to exactly one redo, after the grace period."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from adapters.dynamo.table import dynamo
from core.kops import Role
from core.runs import GroupSurge, Run, RunOptions, RunStatus, RunStep, Selection, StepState
from lambdas.refresher.decide import advance
from lambdas.refresher.plan import SaveRun, SendCommand, SetCapacity, TerminateInstance
from lambdas.refresher.world import GroupFacts, InstanceFacts, World
from sim.values import MAX_ITEM_BYTES, canonical_item, item_bytes
from tests.unit.lambdas.refresher.decide_world import (
    NODES,
    OLD,
    OTHER,
    SETTINGS,
    SPARE,
    T0,
    caps,
    effects,
    node,
    run,
    world,
)


def test_a_pending_worker_step_records_the_surge_before_raising_desired_capacity() -> None:
    decision = advance(run(StepState.PENDING, 0, T0), world([OLD, OTHER], 2), SETTINGS, T0)
    assert isinstance(decision.actions[0], SaveRun)  # the intent first
    assert decision.run.steps[0].state is StepState.SURGING and decision.run.groups[0].raised == 1
    assert caps(decision) == [(NODES, 3, None)]


def test_a_surge_not_visible_is_redone_only_after_the_grace_period() -> None:
    young = advance(run(StepState.SURGING, 1, T0), world([OLD, OTHER], 2), SETTINGS, T0 + timedelta(seconds=5))
    assert not effects(young, SetCapacity) and young.run.steps[0].intent_at == T0  # only "waiting" recorded
    old = advance(run(StepState.SURGING, 1, T0), world([OLD, OTHER], 2), SETTINGS, T0 + timedelta(seconds=31))
    assert caps(old) == [(NODES, 3, None)]


def test_the_old_node_is_drained_only_once_a_spare_is_ready_and_capacity_holds() -> None:
    waiting = advance(run(StepState.SURGING, 1, T0), world([OLD, OTHER, SPARE], 3, ready=[OLD, OTHER]), SETTINGS, T0)
    assert not effects(waiting, SendCommand) and "to register its node" in waiting.waits[0].what
    go = advance(run(StepState.SURGING, 1, T0), world([OLD, OTHER, SPARE], 3), SETTINGS, T0)
    (send,) = effects(go, SendCommand)
    assert send.command.instance_id == OLD and send.command.options.uncordon_on_failure  # pause policy
    assert go.run.steps[0].surge_instance_id == SPARE


def test_a_terminated_instance_found_gone_is_recorded_once_without_a_second_terminate() -> None:
    # crash after TerminateInstanceInAutoScalingGroup, before the state write: the instance is gone
    decision = advance(
        run(StepState.TERMINATING, 1, T0, surge_instance_id=SPARE),
        world([OTHER, SPARE], 2),
        SETTINGS,
        T0 + timedelta(seconds=60),
    )
    assert not effects(decision, TerminateInstance)
    assert decision.run.steps[0].state is StepState.DONE and decision.run.groups[0].raised == 0
    assert decision.run.status is RunStatus.SUCCEEDED


def test_a_failed_drain_pauses_and_gives_the_surge_back() -> None:
    commands = {
        "refresh-r1-0": {"status": "timed_out", "result": {"message": "pdb"}, "command": {"deadline": T0.isoformat()}}
    }
    base = world([OLD, OTHER, SPARE], 3)
    w = World(groups=base.groups, nodes=base.nodes, commands=commands)
    decision = advance(
        run(StepState.DRAINING, 1, T0, command_id="refresh-r1-0", surge_instance_id=SPARE), w, SETTINGS, T0
    )
    assert decision.run.status is RunStatus.PAUSING and "timed_out" in decision.run.reason
    kinds = [a.command.kind.value for a in effects(decision, SendCommand)]
    assert kinds == ["uncordon", "drain"]  # uncordon the old, drain the spare before giving it back
    assert decision.run.steps[0].state is StepState.UNDO_DRAINING


@pytest.mark.parametrize(
    "item",
    [
        {"status": "exploded", "command": {"deadline": T0.isoformat()}},  # no status of the vocabulary
        {"status": "succeeded", "result": "not a map"},
        {"status": "running", "command": {"deadline": T0.replace(tzinfo=None).isoformat()}},  # no zone
        {"status": "running", "command": "not a map"},
    ],
)
def test_an_unreadable_drain_item_is_no_outcome_until_the_drains_own_deadline(item: dict[str, Any]) -> None:
    # the agent partition is written by more than the run: such an item is waited on, noted, never raised on
    base = world([OLD, OTHER, SPARE], 3)
    w = World(groups=base.groups, nodes=base.nodes, commands={"refresh-r1-0": item})
    draining = run(StepState.DRAINING, 1, T0, command_id="refresh-r1-0", surge_instance_id=SPARE)
    waiting = advance(draining, w, SETTINGS, T0 + timedelta(seconds=60))
    assert waiting.run.steps[0].state is StepState.DRAINING and not effects(waiting, SendCommand)
    assert "unreadable" in waiting.waits[0].what
    late = T0 + timedelta(seconds=draining.options.drain_timeout_seconds + SETTINGS.agent_grace_seconds + 1)
    timed_out = advance(draining, w, SETTINGS, late)  # the deadline the run gave the drain bounds the wait
    assert timed_out.run.status is RunStatus.PAUSING and "timed_out" in timed_out.run.reason


def test_a_finished_step_keeps_no_surge_baseline() -> None:
    # only a step in flight reads its baseline (which instances are new); a final one drops it
    decision = advance(
        run(StepState.TERMINATING, 1, T0, surge_instance_id=SPARE), world([OTHER, SPARE], 2), SETTINGS, T0
    )
    (save,) = effects(decision, SaveRun)
    assert save.run.steps[0].state is StepState.DONE and save.run.steps[0].surge_baseline == []


def test_a_whole_group_refreshed_keeps_its_run_item_under_dynamodbs_item_size() -> None:
    # issue 12, `python -m sim replay 1 --nodes 1000 --days 7`: a manual refresh of a 333-instance group kept every
    # step's surge_baseline (333 ids each); at step 52 the RUN# item passed DynamoDB's 400 KB ("Service, account, and
    # table quotas in Amazon DynamoDB"), every later save was refused and the run stayed unchanged for good. With
    # every baseline kept, a group of 150 passes it too (150 steps x 150 ids); without, its item is about 90 KB
    size = 150
    live = [f"i-{n:017x}" for n in range(size)]
    fresh = iter(range(size, 100 * size))
    desired, commands = size, {}
    current = Run(
        run_id="r1",
        cluster="c",
        options=RunOptions(selection=Selection.ALL),
        created_at=T0,
        updated_at=T0,
        groups=[GroupSurge(name=NODES, role="node", min_size=size, original_desired=size, original_max=size)],
        steps=[RunStep(index=k, group=NODES, role="node", instance_id=iid) for k, iid in enumerate(live)],
    )
    now, largest, saves = T0, 0, 0
    while current.status.active:
        now += timedelta(seconds=60)
        instances = tuple(InstanceFacts(i, launch_template_version="1") for i in live)
        group = GroupFacts(NODES, Role.NODE, "nodes-a", size, max(size, desired), desired, instances, "1")
        decision = advance(current, World({NODES: group}, {i: node(i) for i in live}, commands), SETTINGS, now)
        for action in decision.actions:
            if isinstance(action, SaveRun) and (saves := saves + 1) % 10 == 0:  # sizes of every 10th save
                largest = max(largest, item_bytes(canonical_item(dynamo(action.run.to_item()))))
            elif isinstance(action, SetCapacity) and action.desired is not None:
                desired = action.desired
                live.extend(f"i-{next(fresh):017x}" for _ in range(desired - len(live)))
            elif isinstance(action, SendCommand):
                deadline = action.command.deadline.isoformat()
                commands[action.command.command_id] = {"status": "succeeded", "command": {"deadline": deadline}}
            elif isinstance(action, TerminateInstance):
                live.remove(action.instance_id)
                desired -= action.decrement
        live.extend(f"i-{next(fresh):017x}" for _ in range(desired - len(live)))  # Auto Scaling replaces (hand-over)
        current = decision.run
    assert current.status is RunStatus.SUCCEEDED and len(live) == size
    assert largest < MAX_ITEM_BYTES
