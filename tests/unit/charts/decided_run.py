"""A worker step replaced by the refresher's own decider (``lambdas.refresher.decide.advance``) on synthetic worlds
(``worker_run_through_the_decider``), and the world it is driven on: the record the charts' and the run summary's
tests read. Pure."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from core.kops import Role
from core.model import NodeRecord
from core.runs import GroupSurge, Run, RunOptions, RunStep, Selection
from core.settings import RefresherSettings
from lambdas.refresher.decide import advance
from lambdas.refresher.world import GroupFacts, InstanceFacts, World

T0 = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)
SETTINGS = RefresherSettings(cluster_name="c", table_name="t", queue_url="q", effect_grace_seconds=30)
NODES = "nodes-a.c"
OLD, SPARE, OTHER = "i-00000000000000001", "i-00000000000000002", "i-00000000000000003"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def world(instances: list[str], desired: int, ready: list[str], commands: dict | None = None) -> World:
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
    nodes = {i: NodeRecord(instance_id=i, node_name=f"n-{i[-2:]}", ready=True, reported_at=T0) for i in ready}
    return World(groups={NODES: group}, nodes=nodes, commands=commands or {})


def worker_run_through_the_decider() -> Run:
    """One worker step replaced by ``lambdas.refresher.decide.advance``: surge at 0 s, spare registered at 5 s and
    Ready at 10 s (drain asked), drain succeeded (terminate asked) at 20 s, old instance gone at 30 s."""
    run = Run(
        run_id="r1",
        cluster="c",
        options=RunOptions(selection=Selection.ALL),
        created_at=T0,
        updated_at=T0,
        groups=[GroupSurge(name=NODES, role="node", min_size=1, original_desired=2, original_max=4)],
        steps=[RunStep(index=0, group=NODES, role="node", instance_id=OLD)],
    )
    drained = {"refresh-r1-0": {"status": "succeeded", "result": {}, "command": {"deadline": at(600).isoformat()}}}
    for seconds, w in (
        (0, world([OLD, OTHER], 2, [OLD, OTHER])),
        (5, world([OLD, OTHER, SPARE], 3, [OLD, OTHER])),
        (10, world([OLD, OTHER, SPARE], 3, [OLD, OTHER, SPARE])),
        (20, world([OLD, OTHER, SPARE], 3, [OLD, OTHER, SPARE], drained)),
        (30, world([OTHER, SPARE], 2, [OTHER, SPARE], drained)),
    ):
        run = advance(run, w, SETTINGS, at(seconds)).run
    return run
