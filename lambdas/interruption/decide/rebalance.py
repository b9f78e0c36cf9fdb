"""Rebalance recommendations and what follows them (rules 5, 5a and 5c of the package docstring). Pure.

A rebalance command carries ``options.uncordon_after_seconds`` (``REBALANCE_QUIET_SECONDS``): the agent gives its
cordon back after that quiet period unless something followed (``agent.cordons``). Whatever follows for the
instance (a Spot warning, a lifecycle action, a state change) marks it resolved here (``ResolveCordon``), so the
agent never gives that cordon back; the agent also checks for later commands itself.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from core.clock import aware_time
from core.kops import ManagedGroup, Role
from core.model import CommandKind, CommandStatus
from core.runs import REBALANCE_TRIGGER, DrainTimeoutPolicy, GroupSurge, Run, RunOptions, RunStatus, RunStep, Selection
from core.settings import InterruptionSettings, RebalancePolicy
from lambdas.events.event import Event
from lambdas.interruption.decide.common import ACTIVE, command_id, node_name_of
from lambdas.interruption.plan import (
    Acknowledge,
    Action,
    IgnoreReason,
    JoinReplacement,
    ResolveCordon,
    Skip,
    SkipReason,
    StartReplacement,
)
from lambdas.interruption.world import World

# statuses of a command that may still hold its cordon (skipped: no node; failed: refused before or while cordoning)
HOLDING = (*ACTIVE, CommandStatus.SUCCEEDED.value, CommandStatus.TIMED_OUT.value)
REPLACEMENT = "replacement"  # the Skip step name of rule 5c
TERMINATE_WARNING = "spot-interruption:terminate"  # the reason of a Spot warning's drain (``decide``, rule 3)
SPOT_PREFIX = "spot-"  # a Spot warning's command id (``common.command_id_for``), the ``tightened_by`` of its takeover
NEEDS_UPDATE = "rebalance"  # RunStep.needs_update of a replaced at-risk instance
IN_SERVICE = "InService"


def releasable(item: Mapping[str, Any]) -> bool:
    """True for a ``CMD#`` item whose cordon the agent gives back after a quiet period and that nothing resolved
    yet (``options.uncordon_after_seconds`` set, no ``resolution``). An item of another shape (a ``command`` or
    ``options`` that is no map: the agent's role can write the partition) carries no quiet period, as the agent's
    releaser reads it (``agent.cordons.decisions``): never an error, whoever's item it is (rule 5d reads other
    instances' items)."""
    command = item.get("command")
    options = command.get("options") if isinstance(command, Mapping) else None
    if not isinstance(options, Mapping):
        return False
    return options.get("uncordon_after_seconds") is not None and not item.get("resolution")


def in_effect(item: Mapping[str, Any]) -> bool:
    """A releasable command that is active or still holds its cordon."""
    return releasable(item) and isinstance(item.get("status"), str) and item.get("status") in HOLDING


def rebalance_capped(world: World, settings: InterruptionSettings) -> Acknowledge | None:
    """Rule 5d: a recommendation under ``cordon`` or ``drain``, or one ``replace`` falls back to the cordon for
    (``decide`` asks only when the replacement was skipped: a run's own cordons are ``REBALANCE_REPLACE_LIMIT``'s),
    while the other instances' rebalance commands in effect (``world.rebalance_cordons``) already number
    ``REBALANCE_MAX_CORDONED_PERCENT`` of the cluster's nodes (``world.cluster_nodes``, at least one node) is
    acknowledged, not cordoned. None (no cap) when the node count is unknown, the share is 100 or the policy ignores
    recommendations."""
    percent = settings.rebalance_max_cordoned_percent
    if world.cluster_nodes is None or percent >= 100:  # 100: no cap (a lagging count must not cap anything)
        return None
    if settings.rebalance_policy is RebalancePolicy.IGNORE:
        return None
    cap = max(1, world.cluster_nodes * percent // 100)
    if world.rebalance_cordons < cap:
        return None
    return Acknowledge(
        IgnoreReason.REBALANCE_CAPPED,
        f"{world.rebalance_cordons} of {world.cluster_nodes} nodes already cordoned for rebalance recommendations "
        f"(REBALANCE_MAX_CORDONED_PERCENT={percent}: at most {cap}): not cordoned",
    )


def spot_warned(item: Mapping[str, Any], now: datetime) -> bool:
    """Whether a readable ``CMD#`` item of the instance (``World.commands``) shows a Spot warning that takes the
    instance away: the drain of a warning to terminate (reason ``TERMINATE_WARNING``, any status), or a drain a Spot
    warning took over (rule 5b: ``tightened_by`` a ``spot-`` command id, any status) until its
    ``deadline_tightened_to`` (aware ISO 8601) passes. A tightening records no ``instance-action``: past that deadline
    a ``stop`` warning's instance may be running again, and a terminated one is refused by rule 9 anyway."""
    if str(item.get("command", {}).get("reason", "")) == TERMINATE_WARNING:
        return True
    by, until = item.get("tightened_by"), aware_time(item.get("deadline_tightened_to"))
    return isinstance(by, str) and by.startswith(SPOT_PREFIX) and until is not None and now <= until


def cap_fallback(
    steps: list[Action], cordon_id: str, world: World, settings: InterruptionSettings
) -> tuple[list[Action], Acknowledge | None]:
    """Rule 5d under ``replace`` for ``replacement_steps``' answer ``steps``, whose cordon ``cordon_id`` follows.

    Returns:
        ``(steps, None)`` below the cap, or when a run already replaces the instance (``already_replacing``: its
        cordon is the replacement's); ``(steps, acknowledgement)`` past it when nothing is started or joined (the
        cordon policy's fallback, not recorded); past it with a start or join, ``steps`` with that action's
        ``capped_cordon`` set to ``cordon_id`` (the executor drops the cordon if the replacement is refused).
    """
    capped = rebalance_capped(world, settings)
    if capped is None or any(isinstance(a, Skip) and a.reason is SkipReason.ALREADY_REPLACING for a in steps):
        return steps, None
    if not any(isinstance(a, StartReplacement | JoinReplacement) for a in steps):
        return steps, capped
    return [
        replace(a, capped_cordon=cordon_id) if isinstance(a, StartReplacement | JoinReplacement) else a for a in steps
    ], None


def duplicate_rebalance(own_id: str, commands: Iterable[Mapping[str, Any]], now: datetime) -> Acknowledge | None:
    """Rule 5a: a rebalance recommendation for an instance that a drain is already emptying, that a Spot warning
    already came for (``spot_warned``: AWS may send the recommendation with the warning or after it, and EventBridge
    keeps no order), or whose earlier rebalance command is still in effect, changes nothing (a second cordon would
    restart the quiet period; a second drain would race the first; a replacement run would launch a second instance
    for the one the warning's early detach, or Auto Scaling after the reclaim, replaces). ``now``: aware UTC."""
    others = [c for c in commands if command_id(c) != own_id]
    draining = next((c for c in others if c.get("kind") == CommandKind.DRAIN.value and c.get("status") in ACTIVE), None)
    if draining is not None:
        return Acknowledge(IgnoreReason.ALREADY_DRAINING, f"drain {command_id(draining)} is {draining['status']}")
    warned = next((c for c in others if spot_warned(c, now)), None)
    if warned is not None:
        return Acknowledge(
            IgnoreReason.ALREADY_INTERRUPTED,
            f"Spot warning {command_id(warned)} ({warned.get('status')}): the instance is being terminated",
        )
    earlier = next((c for c in others if in_effect(c)), None)
    if earlier is not None:
        return Acknowledge(
            IgnoreReason.REBALANCE_IN_EFFECT, f"{command_id(earlier)} ({earlier['status']}) still holds the node"
        )
    return None


# reasons of the drains a Spot warning takes over (tightens) instead of starting a second drain: a rebalance drain
# (``rebalance-recommendation``, a replacement run's ``rebalance-replace ...``) and a refresh run's drain
# (``refresh <run> step <n>``, ``lambdas.refresher.decide.context.Context.command``)
TAKEOVER_REASONS = ("rebalance", "refresh ")


def active_takeover_drain(commands: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The instance's queued or running drain that a rebalance recommendation or a refresh run started, if any (a
    Spot warning tightens it instead of starting a second drain: one drain, one agent slot)."""
    return next(
        (
            c
            for c in commands
            if c.get("kind") == CommandKind.DRAIN.value
            and c.get("status") in ACTIVE
            and str(c.get("command", {}).get("reason", "")).startswith(TAKEOVER_REASONS)
        ),
        None,
    )


def resolve_all(commands: Iterable[Mapping[str, Any]], resolution: str, skip: str = "") -> list[ResolveCordon]:
    """``ResolveCordon`` for every releasable command of the instance (but ``skip``) whose cordon is or may be
    held: something followed the recommendation, so the cordon stays."""
    return [
        ResolveCordon(command_id(c), resolution)
        for c in commands
        if releasable(c) and c.get("status") in HOLDING and command_id(c) != skip
    ]


def replacement_steps(
    notice: Event, now: datetime, settings: InterruptionSettings, world: World, group: ManagedGroup
) -> list[Action]:
    """Rule 5c (``REBALANCE_POLICY=replace``): replace the at-risk instance surge first, through a refresh run.

    - Never a control-plane node (a kOps master group has min = max = 1 and its instance is an etcd member; it is
      replaced only by a refresh or kOps), nor one of a group without a kOps role (``Skip``, ``control_plane`` /
      ``unknown_role``); never an instance its ASG is not keeping ``InService`` (``not_in_service``).
    - No run active: a new one-step run (``replacement_run``; ``StartReplacement``).
    - The active run already replaces the instance: ``already_replacing``.
    - The active run is a replacement run (trigger ``rebalance``, still ``running``) with fewer unfinished steps than
      ``REBALANCE_REPLACE_LIMIT``: the instance joins it (``JoinReplacement``); at the limit: ``replace_limit``.
    - Any other active run (a refresh, or a replacement run that is pausing or cancelling): ``run_active``.

    Whatever is skipped, the recommendation's cordon is recorded and sent as under ``cordon`` (the caller adds it):
    that is the fallback, given back after the quiet period when nothing follows.
    """
    facts = world.instance
    if group.role is Role.CONTROL_PLANE:
        return [Skip(REPLACEMENT, SkipReason.CONTROL_PLANE, "masters are never replaced for a recommendation")]
    if group.role is not Role.NODE:
        return [Skip(REPLACEMENT, SkipReason.UNKNOWN_ROLE, f"{group.name} has no kOps role tag")]
    if facts.lifecycle_state != IN_SERVICE or facts.asg is None:
        return [Skip(REPLACEMENT, SkipReason.NOT_IN_SERVICE, f"lifecycle state {facts.lifecycle_state}")]
    step = RunStep(
        index=0,
        group=group.name,
        role=Role.NODE.value,
        instance_id=facts.instance_id,
        node_name=node_name_of(world, now, settings),
        needs_update=NEEDS_UPDATE,
    )
    surge = group_surge(group, facts.asg)
    run = world.active_run
    if run is None:
        return [StartReplacement(replacement_run(notice, now, settings, step, surge))]
    if any(s.instance_id == facts.instance_id and not s.state.final for s in run.steps):
        return [Skip(REPLACEMENT, SkipReason.ALREADY_REPLACING, f"run {run.run_id}")]
    if run.options.trigger != REBALANCE_TRIGGER or run.status is not RunStatus.RUNNING:
        what = f"run {run.run_id} ({run.options.trigger}, {run.status.value}) is active"
        return [Skip(REPLACEMENT, SkipReason.RUN_ACTIVE, what)]
    unfinished = sum(1 for s in run.steps if not s.state.final)
    if unfinished >= settings.rebalance_replace_limit:
        what = f"run {run.run_id} replaces {unfinished} (REBALANCE_REPLACE_LIMIT={settings.rebalance_replace_limit})"
        return [Skip(REPLACEMENT, SkipReason.REPLACE_LIMIT, what)]
    joined = step.model_copy(update={"index": len(run.steps)})
    known = any(g.name == group.name for g in run.groups)
    return [JoinReplacement(run.run_id, joined, None if known else surge, settings.rebalance_replace_limit)]


def replacement_run(
    notice: Event, now: datetime, settings: InterruptionSettings, step: RunStep, surge: GroupSurge
) -> Run:
    """The one-instance refresh run that replaces ``step``'s instance (trigger ``rebalance``).

    Its id is ``<event time yyyymmddThhmmssZ>-<6 hex of the event id>``: a duplicate of the event names the same
    run, so its ``RUN#`` item is written once. Options: every listed instance is replaced (``all``), at most
    ``REBALANCE_REPLACE_LIMIT`` at once, the old node's drain has ``REBALANCE_DRAIN_TIMEOUT_SECONDS`` and pauses the
    run when it fails or times out (the node uncordoned, the spare given back) unless a Spot warning tightened it
    (the refresher then terminates it: ``lambdas.refresher.decide.replace``).
    """
    digest = hashlib.sha256(notice.event_id.encode()).hexdigest()[:6]
    options = RunOptions(
        trigger=REBALANCE_TRIGGER,
        selection=Selection.ALL,
        instance_groups=(surge.name,),
        max_surge=settings.rebalance_replace_limit,
        drain_timeout_seconds=settings.rebalance_drain_timeout_seconds,
        drain_timeout_policy=DrainTimeoutPolicy.PAUSE,
    )
    return Run(
        run_id=f"{notice.event_time.strftime('%Y%m%dT%H%M%SZ')}-{digest}",
        cluster=settings.cluster_name,
        options=options,
        created_at=now,
        updated_at=now,
        groups=[surge],
        steps=[step],
    )


def group_surge(group: ManagedGroup, asg: Mapping[str, Any]) -> GroupSurge:
    """The run's record of ``group`` from its DescribeAutoScalingGroups element (``MinSize``, ``DesiredCapacity``,
    ``MaxSize``); the refresher reads the sizes again before its first surge (``rebase``)."""
    return GroupSurge(
        name=group.name,
        role=group.role.value,
        instance_group=group.instance_group,
        min_size=int(asg.get("MinSize", 0)),
        original_desired=int(asg.get("DesiredCapacity", 0)),
        original_max=int(asg.get("MaxSize", 0)),
    )
