"""The refresher's selection of instances to replace and its plan table (pure: synthetic worlds)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from core.kops import Role
from core.model import NodeRecord
from core.runs import RunOptions, Selection
from lambdas.refresher.select import format_table, select
from lambdas.refresher.world import GroupFacts, InstanceFacts, World

T0 = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)
NODES = "nodes-a.c"
OLD, SPARE, OTHER = "i-00000000000000001", "i-00000000000000002", "i-00000000000000003"


def node(iid: str, ready: bool = True) -> NodeRecord:
    return NodeRecord(instance_id=iid, node_name=f"n-{iid[-2:]}", ready=ready, reported_at=T0)


def test_selection_skips_instances_on_the_current_template_and_orders_masters_first() -> None:
    master = GroupFacts(
        "m.c", Role.CONTROL_PLANE, "master-a", 1, 1, 1, (InstanceFacts(OTHER, "a", "InService", "3", T0),), "3"
    )
    workers = GroupFacts(
        NODES,
        Role.NODE,
        "nodes-a",
        1,
        2,
        2,
        (InstanceFacts(OLD, "a", "InService", "1", T0), InstanceFacts(SPARE, "a", "InService", "2", T0)),
        "2",
    )
    w = World(groups={NODES: workers, "m.c": master}, nodes={OTHER: node(OTHER)})
    plan = select(RunOptions(selection=Selection.MAX_AGE), w, T0 + timedelta(days=1), 7 * 86400)
    assert [(s.instance_id, s.needs_update) for s in plan.steps] == [(OLD, "launch_template")]
    forced = select(RunOptions(selection=Selection.ALL), w, T0, 7 * 86400)
    assert [s.group for s in forced.steps] == ["m.c", NODES, NODES]
    assert "NEEDS-UPDATE" in format_table(forced.rows) and forced.refusal is None
    not_ready = World(groups=w.groups, nodes={OTHER: node(OTHER, ready=False)})
    assert "masters not all Ready" in (select(RunOptions(), not_ready, T0, 1).refusal or "")
