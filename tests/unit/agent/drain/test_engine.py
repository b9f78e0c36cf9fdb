"""The engine's control-plane guard (``agent.drain.guard``): a drain or cordon of a control-plane node is done only
for a refresher master step or a Spot warning or lifecycle hook of the node itself; beyond ``max_control_plane_drains``
drains at once one more must wait (``ControlPlaneBusyError``); either way the node is not even cordoned. Workers are
not limited. On a fake API that fails the test if the node is written to."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from agent.drain.engine import DrainEngine
from agent.drain.policy import is_control_plane
from agent.kube.views import NodeView
from core.exceptions import ControlPlaneBusyError, ControlPlaneRefusedError, KubernetesApiError
from core.model import Command, CommandKind, utcnow
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


def drain(
    command_id: str = "spot-1", reason: str = "spot-interruption:terminate", kind: CommandKind = CommandKind.DRAIN
) -> Command:
    return Command(
        command_id=command_id,
        cluster="demo",
        kind=kind,
        instance_id=INSTANCE,
        node_name="n1",
        reason=reason,
        deadline=utcnow() + timedelta(seconds=120),
    )


SETTINGS = AgentSettings(cluster_name="demo", table_name="t", queue_url="q")
MASTER = {"node-role.kubernetes.io/control-plane": ""}


def engine_of(labels: dict[str, str], limit: int = 1) -> DrainEngine:
    return DrainEngine(OneNode(labels), SETTINGS, max_control_plane_drains=limit)  # type: ignore[arg-type]  # fake


@pytest.mark.parametrize("step", ["run", "cordon"])
def test_a_control_plane_drain_beyond_the_limit_waits_and_the_node_is_untouched(step: str) -> None:
    engine = engine_of(MASTER)
    engine.guard.admit(drain("refresh-r1-0", "refresh r1 step 0"), engine.kube.get_node("n1"))  # type: ignore[arg-type]  # the fake's node
    with pytest.raises(ControlPlaneBusyError) as busy:
        getattr(engine, step)(drain())
    assert busy.value.holders == ["refresh-r1-0"]
    engine.guard.release("refresh-r1-0")  # the first one ended: the next may start (and cordons)
    with pytest.raises(Written):
        getattr(engine, step)(drain())


@pytest.mark.parametrize("step", ["run", "cordon"])
@pytest.mark.parametrize("kind", [CommandKind.DRAIN, CommandKind.CORDON])
@pytest.mark.parametrize("reason", ["rebalance-recommendation", "replenish compensate", "test", ""])
def test_a_control_plane_command_for_another_reason_is_refused_untouched(
    step: str, kind: CommandKind, reason: str
) -> None:
    with pytest.raises(ControlPlaneRefusedError) as refused:
        getattr(engine_of(MASTER), step)(drain(reason=reason, kind=kind))
    assert "control-plane node" in refused.value.why


@pytest.mark.parametrize("reason", ["refresh r1 step 0", "spot-interruption:terminate", "asg-lifecycle:masters-a"])
def test_a_master_step_or_an_interruption_of_the_node_itself_drains_it(reason: str) -> None:
    with pytest.raises(Written):
        engine_of(MASTER).run(drain(reason=reason))


@pytest.mark.parametrize(("labels", "limit"), [({"node-role.kubernetes.io/node": ""}, 0), (MASTER, 1)])
def test_workers_are_not_limited_and_the_first_master_drain_starts(labels: dict[str, str], limit: int) -> None:
    with pytest.raises(Written):
        engine_of(labels, limit).run(drain())


def test_zero_refuses_every_control_plane_drain() -> None:
    with pytest.raises(ControlPlaneRefusedError):
        engine_of(MASTER, 0).run(drain())


def test_the_slot_is_given_back_when_the_drain_ends_however_it_ends() -> None:
    engine = engine_of(MASTER)
    with pytest.raises(Written):
        engine.run(drain("a"))  # the cordon's patch raised: the drain is over
    with pytest.raises(Written):
        engine.run(drain("b"))  # so the slot is free for the next one


class Flaky(OneNode):
    """The API down (HTTP 503) when the node is patched."""

    def patch_node(self, name: str, patch: Any) -> NodeView:
        raise KubernetesApiError("patch node: HTTP 503")


def test_a_retryable_error_keeps_the_slot_for_the_retry_until_the_command_ends() -> None:
    engine = DrainEngine(Flaky(MASTER), SETTINGS, max_control_plane_drains=1)  # type: ignore[arg-type]  # fake
    with pytest.raises(KubernetesApiError):
        engine.run(drain("a"))  # handed back or retried: no other master drain may start meanwhile
    with pytest.raises(ControlPlaneBusyError):
        engine.run(drain("b"))
    with pytest.raises(KubernetesApiError):
        engine.run(drain("a"))  # its retry takes its own slot again
    engine.guard.release("a")  # what the consumer does when "a" ends
    with pytest.raises(KubernetesApiError):
        engine.run(drain("b"))


def test_control_plane_labels() -> None:
    assert is_control_plane({"node-role.kubernetes.io/master": ""})
    assert is_control_plane({"kubernetes.io/role": "master"})
    assert not is_control_plane({"node-role.kubernetes.io/node": "", "kubernetes.io/role": "node"})
