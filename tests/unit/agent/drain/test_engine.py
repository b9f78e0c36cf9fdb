"""The engine's control-plane cap: a drain of a control-plane node beyond ``max_control_plane_drains`` at once is
refused (failed, the node not even cordoned); workers are not limited. On a fake API that fails the test if the
node is written to."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from agent.drain.engine import DrainEngine
from agent.drain.policy import is_control_plane
from agent.kube.views import NodeView
from core.model import Command, CommandKind, CommandStatus, utcnow
from core.settings import AgentSettings

INSTANCE = "i-0123456789abcdef0"


class Written(Exception):
    """The engine went on to cordon (patch) the node."""


class OneNode:
    """A Kubernetes API with one node; a patch raises ``Written``."""

    def __init__(self, labels: dict[str, str]) -> None:
        self.node = NodeView(name="n1", provider_id=f"aws:///us-east-1a/{INSTANCE}", labels=labels, ready=True)

    def get_node(self, name: str) -> NodeView | None:
        return self.node if name == self.node.name else None

    def list_nodes(self) -> list[NodeView]:
        return [self.node]

    def patch_node(self, name: str, patch: Any) -> NodeView:
        raise Written(name)


def drain() -> Command:
    return Command(
        command_id="spot-1",
        cluster="demo",
        kind=CommandKind.DRAIN,
        instance_id=INSTANCE,
        node_name="n1",
        reason="test",
        deadline=utcnow() + timedelta(seconds=120),
    )


SETTINGS = AgentSettings(cluster_name="demo", table_name="t", queue_url="q")
MASTER = {"node-role.kubernetes.io/control-plane": ""}


def test_a_control_plane_drain_beyond_the_limit_is_refused_and_the_node_untouched() -> None:
    engine = DrainEngine(OneNode(MASTER), SETTINGS, max_control_plane_drains=1)  # type: ignore[arg-type]  # fake
    assert engine._control_plane_slots.acquire(blocking=False)  # one control-plane drain in flight
    result = engine.run(drain())
    assert result.status is CommandStatus.FAILED and "MAX_CONTROL_PLANE_DRAINS" in result.message
    assert not result.cordoned_by_us
    engine._control_plane_slots.release()  # the first one ended: the next may start (and cordons)
    with pytest.raises(Written):
        engine.run(drain())


@pytest.mark.parametrize(("labels", "limit"), [({"node-role.kubernetes.io/node": ""}, 0), (MASTER, 1)])
def test_workers_are_not_limited_and_the_first_master_drain_starts(labels: dict[str, str], limit: int) -> None:
    engine = DrainEngine(OneNode(labels), SETTINGS, max_control_plane_drains=limit)  # type: ignore[arg-type]  # fake
    with pytest.raises(Written):
        engine.run(drain())


def test_zero_refuses_every_control_plane_drain() -> None:
    engine = DrainEngine(OneNode(MASTER), SETTINGS, max_control_plane_drains=0)  # type: ignore[arg-type]  # fake
    assert engine.run(drain()).status is CommandStatus.FAILED


def test_control_plane_labels() -> None:
    assert is_control_plane({"node-role.kubernetes.io/master": ""})
    assert is_control_plane({"kubernetes.io/role": "master"})
    assert not is_control_plane({"node-role.kubernetes.io/node": "", "kubernetes.io/role": "node"})
