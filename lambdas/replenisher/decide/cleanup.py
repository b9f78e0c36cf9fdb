"""Rule 9, clean up: surplus control-plane instances beyond their etcd members, and instances InService too long
without a registered node. Pure."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from core.kops import Role
from lambdas.replenisher.decide.builder import SURPLUS_PREFIX, Builder, drain_command, drain_done, send_if_needed
from lambdas.replenisher.plan import Operation, Reason, Terminate
from lambdas.replenisher.world import IN_SERVICE, Instance, run_active

ETCD_MEMBERS_PER_GROUP = 1  # kOps: one etcd member per control-plane instance group (master-<az>)


def cleanup(b: Builder) -> None:
    world = b.world
    limit = b.settings.cleanup_limit
    protected = set(world.protected)
    for led in b.ledgers.values():
        if led.compensation is not None:
            protected.update(g.instance_id for g in led.compensation.give_back.values())
    run_groups = {name for name in world.groups for text in world.active_runs if name in text}
    for name in sorted(world.groups):
        group = world.groups[name]
        if group.role is not Role.CONTROL_PLANE or name in run_groups:
            continue
        active = list(group.active)
        if len(active) <= ETCD_MEMBERS_PER_GROUP:
            continue

        def rank(i: Instance) -> tuple[int, str]:
            node = world.nodes.get(i.instance_id)
            return (0 if node and node.ready else 1 if node else 2, i.instance_id)

        surplus = sorted(active, key=rank)[ETCD_MEMBERS_PER_GROUP:]
        for inst in surplus:
            if inst.instance_id in protected:
                b.note(Reason.PROTECTED, f"surplus master {inst.instance_id} belongs to a refresh or replacement")
                continue
            if b.cleanups >= limit:
                b.note(Reason.CLEANUP_LIMIT, f"surplus master {inst.instance_id} left for the next invocation")
                continue
            b.cleanups += 1
            decrement = b.desired[name] > ETCD_MEMBERS_PER_GROUP
            why = f"surplus master: {name} defines {ETCD_MEMBERS_PER_GROUP} etcd member"
            if inst.instance_id in world.nodes:
                command_id = f"{SURPLUS_PREFIX}{inst.instance_id}"
                item = world.commands.get(command_id)
                deadline = (
                    datetime.fromisoformat(str(item["command"]["deadline"]))
                    if item
                    else b.now + timedelta(seconds=b.settings.giveback_drain_timeout_seconds)
                )
                if not drain_done(b, command_id, deadline):
                    send_if_needed(b, drain_command(b, inst.instance_id, command_id, deadline, why))
                    b.operations.add(Operation.SURPLUS_CLEANUP)
                    continue
            b.actions.append(Terminate(inst.instance_id, name, decrement, why))
            if decrement:
                b.desired[name] -= 1
            b.operations.add(Operation.SURPLUS_CLEANUP)
            protected.add(inst.instance_id)

    if not world.nodes:
        if any(i.lifecycle_state == IN_SERVICE for g in world.groups.values() for i in g.instances):
            b.note(Reason.MEMBERSHIP_UNAVAILABLE, "no fresh NODE# record: unregistered instances are not judged")
        return
    horizon = timedelta(seconds=b.settings.max_provision_seconds)
    for name in sorted(world.groups):
        if name in run_groups:
            continue
        for inst in world.groups[name].instances:
            if inst.lifecycle_state != IN_SERVICE or inst.instance_id in world.nodes or inst.launch_time is None:
                continue
            if b.now - inst.launch_time <= horizon or inst.instance_id in protected:
                continue
            if b.cleanups >= limit:
                b.note(Reason.CLEANUP_LIMIT, f"unregistered {inst.instance_id} left for the next invocation")
                continue
            b.cleanups += 1
            age = int((b.now - inst.launch_time).total_seconds())
            b.actions.append(
                Terminate(
                    inst.instance_id, name, False, f"InService {age} s without a registered node: the group replaces it"
                )
            )
            b.operations.add(Operation.SURPLUS_CLEANUP)


def runs_text(items: Iterable[dict[str, Any]]) -> tuple[str, ...]:
    """The active ``RUN#`` items as JSON text (how the cleanup finds the groups a run names)."""
    return tuple(json.dumps(item, default=str, sort_keys=True) for item in items if run_active(item))
