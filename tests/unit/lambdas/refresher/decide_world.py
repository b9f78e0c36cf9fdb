"""A one-group world and a one-step run for the refresher's pure decisions (``lambdas.refresher.decide.advance``):
the shared setup of ``test_decide`` and ``decide/test_*``. No I/O."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from core.kops import Role
from core.model import NodeRecord
from core.runs import GroupSurge, Run, RunOptions, RunStatus, RunStep, Selection, StepState
from core.settings import RefresherSettings
from lambdas.refresher.plan import SetCapacity
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
    return World(groups={NODES: group}, nodes={i: node(i) for i in ready}, membership_confirmed=True)


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
    """The actions of ``decision`` of type ``kind``, in order."""
    return [a for a in decision.actions if isinstance(a, kind)]


def caps(decision) -> list[tuple[str, int | None, int | None]]:
    """The capacity effects as (group, desired, MaxSize)."""
    return [(a.asg_name, a.desired, a.max_size) for a in effects(decision, SetCapacity)]


def sized(base: World, min_size: int | None = None, max_size: int | None = None, **commands: object) -> World:
    """``base`` with the group's MinSize and MaxSize as kOps set them, and the run's commands (by id)."""
    group = base.groups[NODES]
    group = replace(
        group,
        min_size=group.min_size if min_size is None else min_size,
        max_size=group.max_size if max_size is None else max_size,
    )
    return World(groups={NODES: group}, nodes=base.nodes, commands=commands)


DRAINED = {"status": "succeeded", "result": {"message": ""}, "command": {"deadline": T0.isoformat()}}


def two_undoing(first: dict[str, object], second: dict[str, object], raised: int = 2) -> Run:
    """A pausing run whose group holds ``raised`` surge units, both its steps giving theirs back (``undoing``): step 0
    (``OLD``) as ``run`` builds it with ``first``, step 1 (``OTHER``, baseline ``[OLD, OTHER]``) with ``second`` over
    those defaults."""
    r = run(StepState.UNDOING, raised, T0, **first).model_copy(update={"status": RunStatus.PAUSING})
    fields: dict[str, object] = {
        "index": 1,
        "group": NODES,
        "role": "node",
        "instance_id": OTHER,
        "state": StepState.UNDOING,
        "intent_at": T0,
        "surge_baseline": [OLD, OTHER],
    }
    other = RunStep.model_validate({**fields, **second})
    return r.model_copy(update={"steps": [r.steps[0], other]})
