"""Which instances a run replaces, in which order, and the plan table. Pure: world in, selection out.

Selection (per managed group, per live instance):

- ``forced``: every instance, when the request says ``all``.
- ``launch_template``: the instance's launch template version differs from the one its group launches now
  (``$Latest``/``$Default`` resolved to a number), as kOps marks an instance NEEDUPDATE.
- ``max_age``: launched longer ago than the maximum age.
- Instances already current and young enough are skipped; groups without a kOps role tag are never touched.

Order: control-plane groups first (by name), then worker groups (by name); within a group, oldest first.

Refusals (nothing is started, the reason is returned): an instance group asked for that does not exist; a master
not Ready (every master group must have ``desired`` live instances whose nodes are Ready, from fresh ``NODE#``
membership).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from core.kops import Role
from core.runs import RunOptions, RunStep, Selection
from lambdas.refresher.world import GroupFacts, World

FORCED = "forced"
LAUNCH_TEMPLATE = "launch_template"
MAX_AGE = "max_age"


@dataclass(frozen=True)
class GroupRow:
    """One line of the plan table."""

    group: str
    role: str
    needs_update: int
    ready: int
    min_size: int
    desired: int
    max_size: int


@dataclass(frozen=True)
class SelectionPlan:
    """The outcome of ``select``.

    Attributes:
        rows: the plan table, one row per group considered.
        steps: the instances to replace, in order (``RunStep`` in state ``pending``).
        refusal: why no run may start (None when it may).
    """

    rows: tuple[GroupRow, ...]
    steps: tuple[RunStep, ...]
    refusal: str | None = None


def masters_not_ready(world: World, besides: str | None = None) -> list[str]:
    """What keeps the control plane from being "all Ready": one line per problem (empty when all are Ready).

    Every control-plane group must have as many live instances as its desired capacity, each with a fresh
    ``NODE#`` record that says Ready; ``besides``: a master whose own node is not asked (the drained one a step is
    about to terminate).
    """
    problems = []
    for group in sorted(world.masters(), key=lambda g: g.name):
        live = group.live
        if len(live) != group.desired:
            problems.append(f"{group.name} has {len(live)} live instances for desired {group.desired}")
        for inst in live:
            if inst.instance_id != besides and not world.ready(inst.instance_id):
                record = world.nodes.get(inst.instance_id)
                what = f"node {record.node_name} NotReady" if record else "no Ready node reported"
                problems.append(f"master {inst.instance_id} of {group.name}: {what}")
    return problems


def needs_update(group: GroupFacts, options: RunOptions, now: datetime, max_age_seconds: int) -> dict[str, str]:
    """Instance id -> why it needs replacing, for the group's live instances (those that do not are absent)."""
    out: dict[str, str] = {}
    for inst in group.live:
        if options.selection is Selection.ALL:
            out[inst.instance_id] = FORCED
        elif (
            group.launch_template_version is not None
            and inst.launch_template_version is not None
            and inst.launch_template_version != group.launch_template_version
        ):
            out[inst.instance_id] = LAUNCH_TEMPLATE
        elif inst.launch_time is not None and (now - inst.launch_time).total_seconds() > max_age_seconds:
            out[inst.instance_id] = MAX_AGE
    return out


def _chosen(group: GroupFacts, wanted: tuple[str, ...] | None) -> bool:
    return wanted is None or group.name in wanted or (group.instance_group or "") in wanted


def select(options: RunOptions, world: World, now: datetime, max_age_seconds: int) -> SelectionPlan:
    """Choose the instances to replace (rules in the module docstring).

    Args:
        options: the run's options (selection, instance groups).
        world: groups with instances, launch times and template versions; membership.
        now: the current time (UTC).
        max_age_seconds: the maximum age (the request's, else the settings').
    """
    managed = [g for g in world.groups.values() if g.role is not Role.UNKNOWN]
    if options.instance_groups is not None:
        known = {g.name for g in managed} | {g.instance_group for g in managed if g.instance_group}
        unknown = [name for name in options.instance_groups if name not in known]
        if unknown:
            return SelectionPlan((), (), f"unknown instance groups: {', '.join(unknown)}")
    chosen = [g for g in managed if _chosen(g, options.instance_groups)]
    order = sorted(chosen, key=lambda g: (g.role is not Role.CONTROL_PLANE, g.name))
    rows: list[GroupRow] = []
    steps: list[RunStep] = []
    for group in order:
        reasons = needs_update(group, options, now, max_age_seconds)
        rows.append(
            GroupRow(
                group=group.name,
                role=group.role.value,
                needs_update=len(reasons),
                ready=sum(1 for i in group.live if world.ready(i.instance_id)),
                min_size=group.min_size,
                desired=group.desired,
                max_size=group.max_size,
            )
        )
        live = sorted(
            (i for i in group.live if i.instance_id in reasons), key=lambda i: (i.launch_time or now, i.instance_id)
        )
        for inst in live:
            record = world.nodes.get(inst.instance_id)
            steps.append(
                RunStep(
                    index=len(steps),
                    group=group.name,
                    role=group.role.value,
                    instance_id=inst.instance_id,
                    node_name=record.node_name if record else None,
                    needs_update=reasons[inst.instance_id],
                )
            )
    problems = masters_not_ready(world)
    refusal = ("masters not all Ready: " + "; ".join(problems)) if problems else None
    return SelectionPlan(tuple(rows), tuple(steps), refusal)


def format_table(rows: tuple[GroupRow, ...] | list[GroupRow], deadlines: Mapping[str, int] | None = None) -> str:
    """The plan table as text, one line per group, then the run's wait deadlines (``core.runs.WaitDeadline``) and
    the canary rule when ``deadlines`` is given::

    GROUP                               ROLE           NEEDS-UPDATE  READY  MIN  DESIRED  MAX
    master-us-east-1a.masters.demo...   control-plane             1      1    1        1    1
    deadlines: spare_launch 600 s, spare_register 900 s, ...; the first replacement runs alone (canary)
    """
    header = ("GROUP", "ROLE", "NEEDS-UPDATE", "READY", "MIN", "DESIRED", "MAX")
    lines = [header] + [
        (r.group, r.role, str(r.needs_update), str(r.ready), str(r.min_size), str(r.desired), str(r.max_size))
        for r in rows
    ]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = []
    for line in lines:
        cells = [line[0].ljust(widths[0]), line[1].ljust(widths[1])]
        cells += [cell.rjust(width) for cell, width in zip(line[2:], widths[2:], strict=True)]
        out.append("  ".join(cells).rstrip())
    if deadlines:
        said = ", ".join(f"{name} {seconds} s" for name, seconds in deadlines.items())
        out.append(f"deadlines: {said}; past one the run pauses; the first replacement runs alone (canary)")
    return "\n".join(out)
