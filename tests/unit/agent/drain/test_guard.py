"""Which commands may touch a control-plane node (``agent.drain.guard``) and the in-process slots."""

from __future__ import annotations

from datetime import timedelta

import pytest

from agent.drain.guard import REFRESH_REASON_PREFIX, LocalControlPlaneGuard, control_plane_refusal
from agent.drain.policy import DEADLINE_BOUND_REASONS
from agent.kube.views import NodeView
from core.exceptions import ControlPlaneBusyError, ControlPlaneRefusedError
from core.model import Command, CommandKind, utcnow

MASTER = NodeView(
    name="m1", provider_id="aws:///us-east-1a/i-0123456789abcdef0", labels={"node-role.kubernetes.io/master": ""}
)
WORKER = NodeView(
    name="w1", provider_id="aws:///us-east-1a/i-0fedcba9876543210", labels={"node-role.kubernetes.io/node": ""}
)


def command(reason: str, kind: CommandKind = CommandKind.DRAIN, command_id: str = "c1") -> Command:
    return Command(
        command_id=command_id,
        cluster="demo",
        kind=kind,
        instance_id="i-0123456789abcdef0",
        reason=reason,
        deadline=utcnow() + timedelta(seconds=120),
    )


@pytest.mark.parametrize("kind", [CommandKind.DRAIN, CommandKind.CORDON])
@pytest.mark.parametrize(
    "reason", ["refresh r-1 step 0", "spot-interruption:terminate", "spot-interruption:stop", "asg-lifecycle:masters"]
)
def test_a_master_step_or_an_interruption_of_the_node_is_allowed(kind: CommandKind, reason: str) -> None:
    assert control_plane_refusal(command(reason, kind), MASTER.name, MASTER.labels) is None


@pytest.mark.parametrize("kind", [CommandKind.DRAIN, CommandKind.CORDON])
@pytest.mark.parametrize(
    "reason",
    ["rebalance-recommendation", "replenish: compensate", "refresh", "refreshing", " spot-interruption:", "", "test"],
)
def test_any_other_reason_is_refused_on_a_master_and_allowed_on_a_worker(kind: CommandKind, reason: str) -> None:
    why = control_plane_refusal(command(reason, kind), MASTER.name, MASTER.labels)
    assert why is not None and "m1 is a control-plane node" in why and repr(reason) in why
    assert control_plane_refusal(command(reason, kind), WORKER.name, WORKER.labels) is None


def test_an_uncordon_of_a_master_is_always_allowed() -> None:
    assert control_plane_refusal(command("anything", CommandKind.UNCORDON), MASTER.name, MASTER.labels) is None


def test_the_refreshers_reason_is_the_one_the_guard_knows() -> None:
    from lambdas.refresher.decide import context

    # a refresh run's commands read "<reason_prefix> <run id> step <n>"; reason_prefix is "refresh" for every run but
    # a rebalance replacement ("rebalance-replace"), which never replaces a control-plane node
    source = context.Context.command.__code__.co_consts
    assert any(isinstance(c, str) and c == " step " for c in source), source
    prefixes = context.Context.reason_prefix.fget.__code__.co_consts  # type: ignore[attr-defined]  # a property
    assert f"{'refresh'} " == REFRESH_REASON_PREFIX and "refresh" in prefixes, prefixes
    assert all(not REFRESH_REASON_PREFIX.startswith(r) for r in DEADLINE_BOUND_REASONS)


def test_local_slots_one_at_a_time_the_holder_again_and_freed_by_release() -> None:
    guard = LocalControlPlaneGuard(1)
    guard.admit(command("refresh r-1 step 0", command_id="a"), MASTER)
    guard.admit(command("refresh r-1 step 0", command_id="a"), MASTER)  # the drain step after the cordon step
    with pytest.raises(ControlPlaneBusyError) as busy:
        guard.admit(command("asg-lifecycle:masters", command_id="b"), MASTER)
    assert busy.value.holders == ["a"]
    guard.admit(command("asg-lifecycle:masters", kind=CommandKind.CORDON, command_id="c"), MASTER)  # no slot
    guard.admit(command("rebalance-recommendation", command_id="d"), WORKER)  # workers are not counted
    guard.release("a")
    guard.admit(command("asg-lifecycle:masters", command_id="b"), MASTER)


def test_no_slot_refuses_every_master_drain_but_not_a_cordon() -> None:
    guard = LocalControlPlaneGuard(0)
    with pytest.raises(ControlPlaneRefusedError, match="MAX_CONTROL_PLANE_DRAINS=0"):
        guard.admit(command("spot-interruption:terminate"), MASTER)
    guard.admit(command("spot-interruption:hibernate", CommandKind.CORDON), MASTER)
