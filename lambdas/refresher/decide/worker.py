"""A worker step's replacement, surge first (rules 1 and 2 of the package docstring): start the steps of the
current worker group up to ``max_surge``, and move a surging step to draining once its spare is Ready. Pure."""

from __future__ import annotations

from itertools import compress, repeat
from operator import attrgetter, is_

from core.runs import GroupSurge, RunStatus, RunStep, StepState, WaitDeadline
from lambdas.refresher.decide.context import Context, WaitKind
from lambdas.refresher.plan import SendCommand, SetCapacity, TerminateInstance
from lambdas.refresher.world import GroupFacts

_STATE, _INSTANCE_ID = attrgetter("state"), attrgetter("instance_id")
_MOVING = frozenset(s for s in StepState if s.in_flight).__contains__

# the waits of a surging step, each with its deadline (the later ones count from when the earlier one ended: entering
# one ends those before it; one after it, begun before the step went back, keeps its clock)
SURGE_WAITS = (
    WaitDeadline.SPARE_LAUNCH,
    WaitDeadline.SPARE_REGISTER,
    WaitDeadline.SPARE_READY,
    WaitDeadline.NODES_READY,
)


def surging(p: Context, step: RunStep) -> None:
    """A surging worker step: redo a raise not visible after the grace period (within the ``spare_launch`` deadline;
    a MaxSize lowered below both the surge and the one the run found is a reset, not fought: the run pauses and the
    step gives its surge back); once a spare is Ready and the group keeps ``original_desired`` Ready nodes besides
    those being replaced, drain the old node (rules 1, 2)."""
    group, facts = p.run.group(step.group), p.facts(step)
    if facts is None or not facts.has_live(step.instance_id):
        step.state = StepState.UNDOING
        step.note = "the old instance left its group (interrupted or removed): surge given back"
        p.change(f"step {step.index} undoing: {step.note}")
        return
    if p.run.status.stopping:
        step.state = StepState.UNDOING
        step.note = f"run {p.run.status.value}: surge given back"
        p.change(f"step {step.index} undoing: {step.note}")
        return
    expected = group.original_desired + group.raised
    if facts.desired < expected:
        what = f"{group.name} desired capacity to reach {expected} (it is {facts.desired})"
        if facts.max_size < min(expected, group.original_max):
            # lower than the run found it, and than the surge needs: kOps (or a person) reset it; not fought
            reason = (
                f"MaxSize of {group.name} reset to {facts.max_size} under the surge to {expected} (it was "
                f"{group.original_max}): kOps or a person lowered it, the run does not raise it back"
            )
            p.stop_run(RunStatus.PAUSING, reason)
            step.state = StepState.UNDOING
            step.note = f"MaxSize reset to {facts.max_size}: surge given back"
            p.change(f"step {step.index} undoing: {step.note}")
            return
        if p.overdue(step, WaitDeadline.SPARE_LAUNCH, what):
            step.state = StepState.UNDOING
            step.note = f"{WaitDeadline.SPARE_LAUNCH.value} deadline passed: {what}; surge given back"
            p.change(f"step {step.index} undoing: {step.note}")
            return
        if p.older_than_grace(step.intent_at):
            step.intent_at = p.now
            p.add_capacity_effect(p.capacity(group))
            p.change(
                f"step {step.index}: desired capacity of {group.name} is {facts.desired}, raise it again to {expected}"
            )
        else:
            p.wait(WaitKind.EFFECT, what)
        return
    spares = p.new_instances(step, facts)
    ready = [iid for iid in spares if p.world.ready(iid)]
    if ready and step.spare_ready_at is None:
        step.spare_ready_at = p.now  # saved with this pass's change (the drain, or the start of the nodes_ready wait)
    exclude = p.olds_being_replaced(step.group) | {step.instance_id}
    if ready and p.ready_besides(facts, exclude) >= group.original_desired:
        p.end_wait(step, *SURGE_WAITS)
        step.surge_instance_id = ready[0]
        step.command_id = p.command_id(step)
        step.state = StepState.DRAINING
        step.intent_at = p.now
        p.effects.append(SendCommand(p.drain_command(step)))
        p.change(f"step {step.index}: spare {ready[0]} Ready, drain {step.instance_id}")
        return
    if ready:
        wait, kind = WaitDeadline.NODES_READY, WaitKind.NODE_READY
        what = f"{group.name} to have {group.original_desired} Ready nodes besides those being replaced"
    elif any(iid in p.world.nodes for iid in spares):
        wait, kind = WaitDeadline.SPARE_READY, WaitKind.NODE_READY
        what = f"spare {next(i for i in spares if i in p.world.nodes)} of {group.name} to be Ready"
    elif spares:
        wait, kind = WaitDeadline.SPARE_REGISTER, WaitKind.NODE_READY
        what = f"spare {spares[0]} of {group.name} to register its node"
    else:
        wait, kind = WaitDeadline.SPARE_LAUNCH, WaitKind.LAUNCH
        what = f"{group.name} to launch a spare for {step.instance_id}"
    # the surge waits before this one are over (the spare launched, registered, ...): the record keeps the step's
    # waits in progress only, as its readers take them (a late one of them is no wait past its deadline)
    p.end_wait(step, *SURGE_WAITS[: SURGE_WAITS.index(wait)])
    if p.overdue(step, wait, what):
        step.state = StepState.UNDOING
        step.note = f"{wait.value} deadline passed: {what}; surge given back"
        p.change(f"step {step.index} undoing: {step.note}")
        return
    p.wait(kind, what)


def start_workers(p: Context, current: str, steps: list[RunStep], states: list[StepState] | None = None) -> None:
    """Start the pending steps of worker group ``current`` while fewer than ``max_surge`` are in flight (never more
    than the settings' ``surge_limit``, which the executor clamps the sizes to; one until the run's canary replacement
    is done): raise its desired capacity by one each (a step whose instance left the group is skipped). Before a
    group's first surge its sizes are read again (kOps or another operation may have changed them since the run
    started), and a group carrying compensation (a donor) waits until it is given back. A surged step's
    ``spare_launch`` wait begins at the surge. ``states``: those of ``steps`` (``Context.states``), when the caller has
    them."""
    group = p.run.group(current)
    # the group's pending steps and those in flight found in C (hundreds of steps, a pass): no rule below moves a step
    # of ``steps`` itself (``Context.own`` changes the pass's copy), so the pending ones are those found here
    states = list(map(_STATE, steps)) if states is None else states
    pending = list(compress(steps, map(is_, states, repeat(StepState.PENDING))))
    in_flight = sum(map(_MOVING, states))
    facts = p.world.groups.get(current)
    limit = min(p.run.options.max_surge, p.settings.surge_limit) if p.run.canary_passed else 1
    if not p.run.canary_passed:
        in_flight = len(p.in_flight())
    first = pending[0] if pending else None
    if first is None or in_flight >= limit:
        return
    if facts is not None and group.raised == 0 and in_flight == 0 and group.max_raised_to is None:
        first = p.own(first)  # a pending step: the run read's until this pass copies it
        if current in p.world.donors:
            what = f"{current} to give back the capacity it carries for a compensation"
            if not p.overdue(first, WaitDeadline.GROUP_QUIET, what):
                p.wait(WaitKind.OTHER_OPERATION, what)
            return
        p.end_wait(first, WaitDeadline.GROUP_QUIET)
        rebase(p, group, facts)
    if facts is not None and facts.max_size < group.original_max:
        # lower than the run found it: kOps (a new spec) or a person reset it; a new surge would raise it back
        # (storm seed 152576), so the run pauses as ``surging`` does for a reset under a surge
        p.stop_run(RunStatus.PAUSING, f"MaxSize of {current} reset to {facts.max_size} (it was {group.original_max})")
        return
    for step in pending:
        if in_flight >= limit:
            break
        step = p.own(step)
        if facts is None or not facts.has_live(step.instance_id):
            p.finish_step(step, StepState.SKIPPED, "no longer in its group")
            continue
        group.raised += 1
        step.state = StepState.SURGING
        step.started_at = step.intent_at = p.now
        step.surge_baseline = sorted(map(_INSTANCE_ID, facts.instances))  # the group's ids, in C
        # the launch wait starts with the surge (its deadline counts from it): the surge's pass needs no read-back
        # pass to record it (``passes.outcome_by_event``), and the launch's event nothing to advance
        step.waiting_since[WaitDeadline.SPARE_LAUNCH.value] = p.now
        p.add_capacity_effect(p.capacity(group))
        p.change(
            f"step {step.index}: surge {group.name} to {group.original_desired + group.raised} for {step.instance_id}"
        )
        p.wait(WaitKind.LAUNCH, f"{group.name} to launch a spare for {step.instance_id}")
        in_flight += 1


def floor(group: GroupSurge, facts: GroupFacts) -> int:
    """The MinSize under which a surge unit of ``group`` is the group's own: the larger of its MinSize now and the
    one the run recorded (``track_floor``)."""
    return max(facts.min_size, group.min_size)


def decrements_asked(p: Context, group: str) -> int:
    """The terminations with decrement this pass has asked in ``group`` so far: desired capacity reads them only in a
    later pass, so each step deciding after them counts them (two units given back in one pass, helper-140)."""
    return sum(1 for e in p.effects if isinstance(e, TerminateInstance) and e.decrement and e.asg_name == group)


def track_floor(p: Context) -> None:
    """Follow the group's own size as Auto Scaling clamps it. ``original_desired`` is lowered to a MaxSize read below
    it (kOps shrank the group: a unit MinSize had made its own is clamped away with it; helper-140). While the run
    holds surge units in the group, ``GroupSurge.min_size`` keeps the highest MinSize read, no higher than its MaxSize
    and desired capacity now (Auto Scaling never holds desired capacity under MinSize: one read below the floor says
    the floor went): kOps (or a person) raising MinSize to a unit makes it the group's own (``undo.absorb``) even if
    a later write lowers MinSize again before the step ends (resize seed 340200: MinSize 12 over 10 + 1 for 221 s,
    then 9 with MaxSize 11; the run gave the unit back and left the group one below the size kOps' two writes made).
    Read only over units: at a group's first surge ``rebase`` takes its sizes as they are."""
    for group in p.run.groups:
        facts = p.world.groups.get(group.name)
        if facts is None:
            continue
        if facts.max_size < group.original_desired:
            p.change(f"{group.name}: MaxSize {facts.max_size} under its own size {group.original_desired}: clamped")
            group.original_desired = facts.max_size
        if group.raised <= 0:
            continue
        seen = min(max(group.min_size, facts.min_size), facts.max_size, facts.desired)
        if seen != group.min_size and (facts.min_size > group.min_size or seen < group.min_size):
            p.change(f"{group.name}: MinSize {facts.min_size}, MaxSize {facts.max_size} under the run's surge units: "
                     f"its own size is at least {seen}")  # fmt: skip
            group.min_size = seen


def rebase(p: Context, group: GroupSurge, facts: GroupFacts) -> None:
    """Take the group's sizes as they are now as its own (a group with no surge of the run in place): what the run
    raises and restores is counted from them, never from sizes recorded when the run started. Not when this pass
    already set the group's sizes (a surge given back in the same pass, e.g. a step whose old instance was reclaimed):
    what was read is stale then, and taking it would count the unit just given back as the group's own."""
    if any(isinstance(e, SetCapacity) and e.asg_name == group.name for e in p.effects):
        return
    now = (facts.min_size, facts.desired, facts.max_size)
    if now == (group.min_size, group.original_desired, group.original_max):
        return
    was = (group.min_size, group.original_desired, group.original_max)
    group.min_size, group.original_desired, group.original_max = now
    p.change(f"{group.name}: sizes (min, desired, max) {was} at the run's start are {now} now: counted from these")
