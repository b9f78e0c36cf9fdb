"""The refresher's pure decisions: the step state machine's redo rules.
Synthetic worlds (no I/O): what a crash leaves behind must lead to exactly one redo, after the grace period."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from core.kops import Role
from core.model import NodeRecord
from core.runs import GroupSurge, Run, RunOptions, RunStatus, RunStep, Selection, StepState
from core.settings import RefresherSettings
from lambdas.refresher.decide import advance
from lambdas.refresher.plan import SaveRun, SendCommand, SetCapacity, TerminateInstance
from lambdas.refresher.world import GroupFacts, InstanceFacts, World

T0 = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)
SETTINGS = RefresherSettings(cluster_name="c", table_name="t", queue_url="q", effect_grace_seconds=30)
NODES = "nodes-a.c"
OLD, SPARE, OTHER = "i-00000000000000001", "i-00000000000000002", "i-00000000000000003"


def node(iid: str, ready: bool = True) -> NodeRecord:
    return NodeRecord(instance_id=iid, node_name=f"n-{iid[-2:]}", ready=ready, reported_at=T0)


def world(instances: list[str], desired: int, ready: list[str] | None = None) -> World:
    group = GroupFacts(
        NODES,
        Role.NODE,
        "nodes-a",
        1,
        4,
        desired,
        tuple(InstanceFacts(i, launch_template_version="1") for i in instances),
        "1",
    )
    ready = instances if ready is None else ready
    return World(groups={NODES: group}, nodes={i: node(i) for i in ready})


def run(state: StepState, raised: int, intent: datetime, **step: object) -> Run:
    return Run(
        run_id="r1",
        cluster="c",
        options=RunOptions(selection=Selection.ALL),
        created_at=T0,
        updated_at=T0,
        groups=[GroupSurge(name=NODES, role="node", min_size=1, original_desired=2, original_max=4, raised=raised)],
        steps=[
            RunStep(
                index=0,
                group=NODES,
                role="node",
                instance_id=OLD,
                state=state,
                intent_at=intent,
                surge_baseline=[OLD, OTHER],
                **step,
            )
        ],
    )


def effects(decision, kind):
    return [a for a in decision.actions if isinstance(a, kind)]


def caps(decision) -> list[tuple[str, int | None, int | None]]:
    """The capacity effects as (group, desired, MaxSize)."""
    return [(a.asg_name, a.desired, a.max_size) for a in effects(decision, SetCapacity)]


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
