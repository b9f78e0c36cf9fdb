"""Rule 9, clean up: surplus control-plane instances beyond their etcd members, and instances InService too long
without a registered node. Both judge instances by membership (which has a node, which is Ready), so neither runs
while the agent's ``MEMBERSHIP`` mark is stale (``World.membership_confirmed``): then only the records the agent
wrote lately are fresh, every other instance would read as one without a node, and a master or a worker with pods
on it would be terminated undrained (the simulation's seed 30013: an agent restart, then DynamoDB refusing most of
its writes for minutes). Pure."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from itertools import chain
from operator import attrgetter

from core.kops import Role
from core.model import drain_never_ran, drain_number
from core.runs import Run
from lambdas.replenisher.decide.builder import (
    SURPLUS_PREFIX,
    Builder,
    drain_command,
    drain_done,
    recorded_ids,
    reissued_id,
    send_if_needed,
)
from lambdas.replenisher.plan import Operation, Reason, Terminate
from lambdas.replenisher.world import IN_SERVICE, Instance

ETCD_MEMBERS_PER_GROUP = 1  # kOps: one etcd member per control-plane instance group (master-<az>)
_LAUNCHED = attrgetter("launch_time")  # a datetime (always true) or None: the instances with one, taken in C


def cleanup(b: Builder) -> None:
    world = b.world
    limit = b.settings.cleanup_limit
    protected = set(world.protected)
    for led in b.ledgers.values():
        if led.compensation is not None:
            protected.update(g.instance_id for g in led.compensation.give_back.values())
    if world.runs_unreadable:
        b.note(Reason.PROTECTED, "an active refresh run could not be read: no cleanup until it can")
        return
    if not world.membership_confirmed:  # which instance has a node is unknown: neither judged nor drained by it
        if any(i.lifecycle_state == IN_SERVICE for g in world.groups.values() for i in g.instances):
            b.note(Reason.MEMBERSHIP_UNAVAILABLE, "no fresh MEMBERSHIP mark: no instance is judged by membership")
        return
    # made once per run read by ``gather`` (``World.run_groups``), not of every step each tick
    run_groups = world.run_groups if world.run_groups is not None else run_group_names(world.active_runs)
    for name in sorted(world.groups):
        group = world.groups[name]
        if group.role is not Role.CONTROL_PLANE or name in run_groups:
            continue
        active = list(group.active)
        if len(active) <= ETCD_MEMBERS_PER_GROUP:
            continue

        def rank(i: Instance) -> tuple[int, str]:
            node = world.nodes.get(i.instance_id)
            # serving first (Ready, not ``ending``): a master under a Spot warning goes anyway, it is the surplus
            return (0 if node and node.serving else 1 if node else 2, i.instance_id)

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
                command_id = latest_surplus(recorded_ids(world), inst.instance_id)
                item = world.commands.get(command_id)
                # no drain ran by its deadline, or its item is unreadable (never a finished drain, never recorded
                # again under its id): a new one past every recorded id, a whole timeout
                if command_id in world.unreadable_commands or drain_never_ran(item, b.now):
                    command_id, item = reissued_id(command_id, inst.instance_id, SURPLUS_PREFIX), None
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
            b.note(Reason.MEMBERSHIP_UNAVAILABLE, "no NODE# record: unregistered instances are not judged")
        return
    horizon = timedelta(seconds=b.settings.max_provision_seconds)
    for name in sorted(world.groups):
        if name in run_groups:
            continue
        # only an instance with a launch time can be judged: gather asks EC2 for those InService without a node
        for inst in filter(_LAUNCHED, world.groups[name].instances):
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


def run_group_names(runs: Iterable[Run]) -> frozenset[str]:
    """The groups ``runs`` name (their own and their steps'): the cleanup leaves them alone. Pure."""
    return frozenset(g.name for run in runs for g in run.groups) | {s.group for run in runs for s in run.steps}


def run_instances(run: Run) -> set[str]:
    """The instances a refresh run names, never judged surplus while it is active: each step's old instance, its
    spare and the group's instances when its surge started (``surge_baseline``, kept only while the step is in flight:
    the refresher drops it once the step is final)."""
    steps = run.steps  # three passes in C (a thousand steps whenever the run's item changed: ``gather``)
    ids = set(map(_INSTANCE_ID, steps))
    ids.update(chain.from_iterable(map(_BASELINE, steps)))
    ids.update(filter(None, map(_SPARE, steps)))
    return ids


_INSTANCE_ID, _BASELINE, _SPARE = (
    attrgetter("instance_id"),
    attrgetter("surge_baseline"),
    attrgetter("surge_instance_id"),
)


def latest_surplus(commands: Iterable[str], instance_id: str) -> str:
    """The id of the last drain sent for surplus master ``instance_id``, among the ids ``commands`` recorded
    (readable or not: ``builder.recorded_ids``): ``surplus-<id>``, or the highest ``surplus-<id>-<n>``
    (``builder.reissued_id``) when one is. Pure."""
    base = f"{SURPLUS_PREFIX}{instance_id}"
    sent = [n for n in (drain_number(base, cid) for cid in commands) if n is not None]
    return f"{base}-{max(sent)}" if sent else base
