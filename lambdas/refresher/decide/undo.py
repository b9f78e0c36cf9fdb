"""Giving a step's surge back (a paused or cancelled run, an old instance gone): drain the spare if it has a node,
terminate it with decrement, or lower a surge that launched nothing. A unit Auto Scaling already took back (kOps
lowered MaxSize under the surge: desired capacity clamped, an instance of Auto Scaling's choosing removed) is
counted given back as it is read back, the spare kept (``taken_back``): giving it back again would remove a second
instance. A give-back waiting past its ``give_back`` deadline (for Auto Scaling to launch what it would give back, or
for a lowering to read back) leaves the unit raised, recorded, and the run ends ``failed`` (``give_back_overdue``).
Pure."""

from __future__ import annotations

from core.model import CommandKind, drain_never_ran, drain_number
from core.runs import GroupSurge, RunStep, StepState, WaitDeadline
from lambdas.refresher.decide.context import (
    RECLAIMED_NOTE,
    UNCORDON_SECONDS,
    UNDO_COMMAND_SUFFIX,
    UNDO_DRAIN_SECONDS,
    UNDO_UNCORDON_COMMAND_SUFFIX,
    Context,
    WaitKind,
)
from lambdas.refresher.decide.worker import decrements_asked, floor
from lambdas.refresher.plan import Metric, SendCommand, SetCapacity, TerminateInstance
from lambdas.refresher.world import GroupFacts


def undoing(p: Context, step: RunStep) -> None:
    """Give a step's surge back: pick the spare (one without a node first), drain it if it has a node or the
    membership cannot say it has none (``World.membership_confirmed``: the agent finds its node, or answers it has
    none), else terminate it with decrement; lower a surge that launched nothing; nothing when Auto Scaling already
    took it (``taken_back``)."""
    group, facts = p.run.group(step.group), p.facts(step)
    if facts is None:
        group.raised -= 1
        p.finish_step(step, StepState.UNDONE, f"group {step.group} is gone")
        return
    if taken_back(p, step, facts):
        return
    spare = step.surge_instance_id
    if spare is None or not facts.has_live(spare):
        candidates = p.new_instances(step, facts)
        if candidates:
            # a spare only this step can claim first (``contested``), then one without a node: nothing to drain
            taken = contested(p, step, candidates)
            candidates.sort(key=lambda iid: (iid in taken, iid in p.world.nodes))
            step.surge_instance_id = candidates[0]
            spare = candidates[0]
            p.change(f"step {step.index}: give back spare {spare}")
        else:
            target = lowering_target(p, step, group)  # desired capacity is above it (``taken_back``)
            if len(facts.live) <= target:
                lower(p, step, group, target, "nothing launched")
            elif not give_back_overdue(p, step, f"{group.name} to launch a spare to give back"):
                p.wait(WaitKind.LAUNCH, f"a spare of {group.name} to give back")
            return
    p.end_wait(step, WaitDeadline.GIVE_BACK)  # a spare to give back: its drain and termination have deadlines
    if spare in p.world.nodes or not p.world.membership_confirmed:  # absent from a confirmed list only: no node
        step.state = StepState.UNDO_DRAINING
        # a step giving back another spare (Auto Scaling's replacement of one reclaimed, ``give_back_unit``) has
        # recorded a drain under its id already: the record would refuse this one, and the old spare's outcome
        # would read as this spare's (a terminate undrained): a new id
        sent = step.undo_command_id
        send_undo_drain(p, step, spare, reissued_undo_id(sent) if sent else p.command_id(step, UNDO_COMMAND_SUFFIX))
        p.change(f"step {step.index}: drain spare {spare} before giving it back")
    else:
        step.state = StepState.UNDO_TERMINATING
        step.intent_at = p.now
        p.effects.append(TerminateInstance(step.group, spare, decrement=True))
        p.change(f"step {step.index}: spare {spare} has no node, terminate it with decrement")


def contested(p: Context, step: RunStep, candidates: list[str]) -> set[str]:
    """Of ``candidates`` (``step``'s new instances), those another step of the group in flight with no spare
    recorded could claim as well: outside its ``surge_baseline`` too. A spare is recorded only once Ready (``worker
    .surging``), so two steps surging when the run stopped may both see the later one's; the earlier step taking it
    left the later none to give back, waiting for a launch that never comes (storm seed 178000)."""
    others = [
        set(s.surge_baseline)
        for s in p.in_flight()
        if s is not step and s.group == step.group and s.surge_instance_id is None and s.surge_baseline
    ]
    return {iid for iid in candidates if any(iid not in baseline for baseline in others)}


def send_undo_drain(p: Context, step: RunStep, spare: str, command_id: str | None = None) -> None:
    """Send the drain of ``spare`` under ``command_id`` (None: ``step.undo_command_id`` again), deadline
    ``UNDO_DRAIN_SECONDS`` from now, now the step's intent. A new id, or the drain of an id not recorded yet, is
    recorded with that deadline: the step records when (``undo_sent_at``, ``Context.drain_deadline``). An id
    recorded already keeps the deadline it was recorded with (its message is sent again as recorded)."""
    if command_id is not None:
        step.undo_command_id = command_id
    assert step.undo_command_id is not None
    if command_id is not None or step.undo_command_id not in p.world.commands:
        step.undo_sent_at = p.now
    step.intent_at = p.now
    p.effects.append(
        SendCommand(
            p.command(step, CommandKind.DRAIN, spare, p.node_name(spare), step.undo_command_id, UNDO_DRAIN_SECONDS)
        )
    )


def undo_draining(p: Context, step: RunStep) -> None:
    """The spare's drain: resend it if never recorded; once it ended, terminate the spare with decrement whatever
    its outcome, unless it never ran (``core.model.drain_never_ran``): then a new one is sent under a new id
    (``reissued_undo_id``)."""
    assert step.undo_command_id is not None and step.surge_instance_id is not None
    if step.undo_sent_at is not None and step.undo_sent_at > p.now:
        # a send time not yet come (a clock ahead, a hand-edited RUN# item) would put the deadline of an unreadable
        # drain (``Context.drain_deadline``) as far off, the spare and its surge unit held: counted from now, saved
        p.change(f"step {step.index}: undo drain sent at {step.undo_sent_at.isoformat()}, later than now: from now")
        step.undo_sent_at = p.now
    item = p.world.commands.get(step.undo_command_id)
    if p.unsent(step.undo_command_id) and drain_never_ran(item, p.now):
        # still ``queued`` past its deadline (its message never sent or never received): it can only end unstarted,
        # so sending it again under its id would only be ended unstarted too, every grace period until the sweeper
        # expires it; a new drain, a new id, a whole deadline, now (as after the sweeper's expiry, below)
        facts = p.facts(step)
        if facts is not None and taken_back(p, step, facts):
            return
        send_undo_drain(p, step, step.surge_instance_id, reissued_undo_id(step.undo_command_id))
        p.change(f"step {step.index}: spare drain still queued past its deadline, sent again as a new drain")
        return
    if p.unsent(step.undo_command_id):
        if p.older_than_grace(step.intent_at):
            send_undo_drain(p, step, step.surge_instance_id)
            p.change(f"step {step.index}: undo drain not recorded, send it again")
        else:
            p.wait(WaitKind.EFFECT, f"undo drain {step.undo_command_id} to be recorded")
        return
    status, message = p.drain_outcome(step, step.undo_command_id)
    if status is None:
        p.wait(WaitKind.DRAIN, f"drain of spare {step.surge_instance_id}" + (f": {message}" if message else ""))
        return
    facts = p.facts(step)
    if facts is not None and taken_back(p, step, facts):
        return
    if drain_never_ran(p.world.commands.get(step.undo_command_id), p.now):
        # ended without having run (its message never sent or received, then expired by the sweeper; started only
        # at its deadline; ended by the agent before it ran): nothing ends the spare but this terminate, so no
        # deadline excuses it (as the replenisher's own drains): a new drain, a new id, a whole deadline
        send_undo_drain(p, step, step.surge_instance_id, reissued_undo_id(step.undo_command_id))
        p.change(f"step {step.index}: spare drain never ran ({status}: {message}), sent again")
        return
    step.state = StepState.UNDO_TERMINATING
    step.intent_at = p.now
    p.effects.append(TerminateInstance(step.group, step.surge_instance_id, decrement=True))
    p.change(f"step {step.index}: spare drain {status}, terminate {step.surge_instance_id} with decrement")


def undo_terminating(p: Context, step: RunStep) -> None:
    """The spare's termination: the step is undone once the spare left its group; else terminate it again, within
    the ``give_back`` deadline (from the first retry): past it the spare is kept (uncordoned when the undo drained
    it) and its unit left raised (``give_back_overdue``)."""
    assert step.surge_instance_id is not None
    facts = p.facts(step)
    if facts is None or not facts.has_live(step.surge_instance_id):
        if facts is not None and not give_back_unit(p, step, facts, step.note or "surge given back"):
            return  # the spare left without the run's decrement (reclaimed): Auto Scaling's replacement goes instead
        p.run.group(step.group).raised -= 1
        given_back(p, step, step.note or "surge given back")
        return
    if p.older_than_grace(step.intent_at):
        if taken_back(p, step, facts):
            return
        spare = step.surge_instance_id
        if give_back_overdue(p, step, f"spare {spare} to leave {step.group} after its termination with decrement"):
            # refused for good (AccessDenied...): the spare stays, its node uncordoned when the undo drained it
            kept = uncordon_kept(p, step, spare, terminating=True)  # the step is ``failed`` now: it was terminating
            step.note += f"; spare {spare} kept" + (" and uncordoned" if kept else "")
            return
        step.intent_at = p.now
        p.effects.append(TerminateInstance(step.group, spare, decrement=True))
        p.change(f"step {step.index}: spare {spare} still in service, terminate again")
    else:
        p.wait(WaitKind.TERMINATION, f"spare {step.surge_instance_id} to leave {step.group}")


def give_back_unit(p: Context, step: RunStep, facts: GroupFacts, why: str) -> bool:
    """Whether the surge unit of worker ``step`` is given back by this pass, now that an instance it counted on (its
    old instance, or the spare it gives back) left the group; the caller then lowers ``raised`` and ends the step.

    - Desired capacity is already at most ``original_desired + raised - 1``: the run's termination with decrement
      gave it back. True.
    - MinSize is above that value (raised by kOps or a person under the surge): the unit cannot be given back, it
      is the group's own now (``absorb``). True.
    - Else the instance left by other means (Spot reclaimed it: Auto Scaling keeps the desired capacity and launches
      a replacement). While the group holds no more live instances than that value, desired capacity is lowered to
      it (Auto Scaling then has nothing to pick; ``lower``): False until a later pass reads it back (the first case).
      Once Auto Scaling launched its replacement, that instance (a
      new one that is no step's spare, one without a node first) is given back as a surge is (``undoing``: drained
      if it has a node, terminated with decrement; ``note`` says ``why``), or the step waits for it to launch: False.
    """
    group = p.run.group(step.group)
    target = group.original_desired + group.raised - 1
    if facts.desired <= target and not lowered_by_another(p, step, facts):
        return True
    if floor(group, facts) > target:
        absorb(p, group, facts)
        return True
    if len(facts.live) <= (target := lowering_target(p, step, group)):
        lower(p, step, group, target, why)
        return False
    spares = {s.surge_instance_id for s in p.run.steps if s.surge_instance_id}
    extras = [i for i in p.new_instances(step, facts) if i not in spares]
    if not extras:
        if not give_back_overdue(p, step, f"{group.name} to launch a replacement to give back ({why})"):
            p.wait(WaitKind.LAUNCH, f"{group.name} to launch a replacement to give back ({why})")
        return False
    extras.sort(key=lambda iid: iid in p.world.nodes)  # one without a node first: nothing to drain
    step.surge_instance_id = extras[0]
    step.state = StepState.UNDOING
    step.note = f"{why}; Auto Scaling's replacement {extras[0]} given back"
    p.change(f"step {step.index} undoing: {step.note}")
    return False


def lower(p: Context, step: RunStep, group: GroupSurge, target: int, why: str) -> None:
    """Give ``step``'s surge unit back by lowering desired capacity to ``target`` (the group holds no more live
    instances: Auto Scaling has nothing to pick). The unit counts as given back only once a later pass reads the lower
    value back (``taken_back``, ``give_back_unit``), as a MaxSize restore is (``lifecycle.finish_groups``): the run's
    save precedes the UpdateAutoScalingGroup, and an update refused or never made (throttled; the invocation ended
    between the two) would leave the step final with the unit in place for good (invariant 4). Asked again each pass
    until read back (an absolute value), within the ``give_back`` deadline (``give_back_overdue``)."""
    facts = p.facts(step)
    now = "" if facts is None else f", it is {facts.desired}"
    if give_back_overdue(p, step, f"desired capacity of {group.name} lowered to {target} to read back{now}"):
        return
    note = f"desired lowered to {target}" if why in step.note else f"{why}; desired lowered to {target}"
    if not step.note.endswith(note):
        step.note = f"{step.note}; {note}" if step.note else note
        p.change(f"step {step.index}: {why}; desired capacity of {group.name} lowered to {target}")
    p.add_capacity_effect(SetCapacity(group.name, desired=target))
    p.wait(WaitKind.EFFECT, f"desired capacity of {group.name} at {target} (read back next pass)")


def give_back_overdue(p: Context, step: RunStep, what: str) -> bool:
    """Whether ``step``'s give-back has waited for ``what`` past its ``give_back`` deadline (``Context.overdue``: the
    first call starts its clock; a spare found to give back ends it, ``undoing``). Then the unit is left raised, as an
    operator would have it: nothing more is lowered (Auto Scaling refuses it, or the group holds more live instances
    than the lower value and would pick one to terminate, undrained) nor terminated. The step ends ``failed``; the
    group counts the unit as its own now (``original_desired`` + 1, as ``absorb``: the other steps' targets stay
    true) and records it (``unreturned``); the run stops (pausing, by ``overdue``) and ends ``failed`` naming the
    group and what is left raised (``lifecycle.finish_run``, ``summary.left_raised``)."""
    if not p.overdue(step, WaitDeadline.GIVE_BACK, what):
        return False
    group = p.run.group(step.group)
    group.raised -= 1
    group.original_desired += 1
    group.unreturned += 1
    limit = p.settings.deadline_seconds(WaitDeadline.GIVE_BACK)
    done = f"{step.note}; " if step.note else ""
    p.finish_step(
        step,
        StepState.FAILED,
        f"{done}{WaitDeadline.GIVE_BACK.value} deadline ({limit} s) passed waiting for {what}: its surge unit is "
        f"left raised in {group.name}",
    )
    return True


_LOWERED = "desired lowered to "  # ``lower``'s note, then the value asked


def lowerings_asked(p: Context, step: RunStep, in_time: bool = False) -> list[int]:
    """The desired capacities the other steps of ``step``'s group holding a unit asked to lower it to and still wait
    to read back (``lower``'s note ends with the value); ``in_time``: only those of steps within their ``give_back``
    deadline (a step past it leaves its unit raised when its turn comes, ``give_back_overdue``: a lowering counting
    its ask would lower desired capacity by the unit the run records as left raised)."""
    asked = []
    limit = p.settings.deadline_seconds(WaitDeadline.GIVE_BACK)
    for s in p.owned():
        value = s.note.rpartition(_LOWERED)[2] if s is not step and s.group == step.group and s.holds_unit else ""
        since = s.waiting_since.get(WaitDeadline.GIVE_BACK.value)
        if in_time and since is not None and (p.now - since).total_seconds() > limit:
            continue
        if value.isascii() and value.isdigit() and s.note.endswith(_LOWERED + value):
            asked.append(int(value))
    return asked


def lowering_target(p: Context, step: RunStep, group: GroupSurge) -> int:
    """The desired capacity ``step`` asks to give its unit back by lowering: one below ``original_desired +
    raised``, and one more below for each other step of the group whose lowering is not read back yet. Two steps
    lowering in one pass (a ``max_surge`` 2 run paused while its group launched nothing) ask two units less
    together; each asking one less than ``original_desired + raised`` would lower one unit for both, and the value
    read back would be the other's for each of them, both waiting for good (storm seed 150118)."""
    return group.original_desired + group.raised - 1 - len(lowerings_asked(p, step, in_time=True))


def lowered_by_another(p: Context, step: RunStep, facts: GroupFacts) -> bool:
    """Whether the units desired capacity lacks now (``original_desired + raised`` less the value read) are all
    other steps' lowerings read back: as many of the group's other steps holding a unit asked a value at or above it
    (``lower``'s note). Those are their units given back, which they count when their turn in the pass comes (the
    steps go in ``index`` order), not ``step``'s taken back (which would keep ``step``'s spare and leave another
    waiting for a launch that never comes, the group one above its own size). A unit lacking beyond them is
    ``step``'s (its own lowering read back, or one kOps took back)."""
    group = p.run.group(step.group)
    lacking = group.original_desired + group.raised - facts.desired
    return 0 < lacking <= sum(1 for value in lowerings_asked(p, step) if facts.desired <= value)


def clamped_from_another(p: Context, step: RunStep, facts: GroupFacts) -> bool:
    """Whether the units desired capacity lacks now are all other steps' (``taken_back``): their lowerings read back
    (``lowered_by_another``), then the units of those no live instance backs (``unbacked_others``)."""
    group = p.run.group(step.group)
    lacking = group.original_desired + group.raised - facts.desired
    reached = sum(1 for value in lowerings_asked(p, step) if facts.desired <= value)
    return 0 < lacking <= reached + unbacked_others(p, step, facts)


def unbacked_others(p: Context, step: RunStep, facts: GroupFacts) -> int:
    """How many other steps of ``step``'s group hold a unit no live instance backs (no live spare, no new instance to
    give back) and ask no lowering: a clamp of desired capacity to the live instances (kOps' MaxSize) takes those
    units first, not the unit of a step whose spare runs (storm seed 152378: the run's replacement that an outage
    never launched was clamped away, and the step judged first kept its spare as if its own unit had gone, leaving
    the unlaunched one waiting for good)."""
    count = 0
    for s in p.owned():
        if s is step or s.group != step.group or not s.holds_unit or s.note.rpartition(_LOWERED)[1]:
            continue
        spare = s.surge_instance_id
        if (spare is None or not facts.has_live(spare)) and not p.new_instances(s, facts):
            count += 1
    return count


def given_back(p: Context, step: RunStep, note: str) -> None:
    """End a step whose surge unit was just given back (``raised`` lowered): ``undone``, or ``done`` when its old
    instance was reclaimed and its spare kept (``RECLAIMED_NOTE``, ``replace.left_group``)."""
    if step.note.startswith(RECLAIMED_NOTE):
        p.finish_step(step, StepState.DONE, note)
        p.effects.append(Metric("NodesReplaced"))
    else:
        p.finish_step(step, StepState.UNDONE, note)


def taken_back(p: Context, step: RunStep, facts: GroupFacts) -> bool:
    """Whether the surge unit of a step giving it back is no longer in the group's desired capacity, read back: at
    most ``original_desired + raised - 1`` while the spare is still live (kOps lowered MaxSize under the surge; Auto
    Scaling clamped desired capacity and removed an instance of its choosing). Then it is counted given back
    (``raised`` - 1) and the step ends with nothing terminated: the spare stays the group's (uncordoned when the undo
    drained it), since a termination with decrement would remove a second instance (invariants 1 and 4). The same
    read-back ends a surge whose raise never took effect. So does a MinSize above that value (kOps raised it under
    the surge): Auto Scaling refuses the decrement, the unit is the group's own now (``absorb``)."""
    group = p.run.group(step.group)
    asked = decrements_asked(p, group.name)  # another step's decrement this pass: read back by a later one
    target, desired = group.original_desired + group.raised - 1 - asked, facts.desired - asked
    if (desired > target and floor(group, facts) <= target) or clamped_from_another(p, step, facts):
        return False
    kept = f"desired capacity of {group.name} already {facts.desired} (reset by kOps?)"
    if desired > target:
        absorb(p, group, facts)
        kept = f"MinSize of {group.name} {floor(group, facts)} (raised by kOps?): the unit is the group's own"
    group.raised -= 1
    note = step.note or "surge given back"
    spare = step.surge_instance_id
    if spare is not None and facts.has_live(spare):
        note += f"; {kept}: spare {spare} kept" + (" and uncordoned" if uncordon_kept(p, step, spare) else "")
    given_back(p, step, note)
    return True


def uncordon_kept(p: Context, step: RunStep, spare: str, terminating: bool = False) -> bool:
    """Send the uncordon of ``spare``, which the run keeps, when the undo drained it (its drain recorded and sent:
    invariant 6); whether it was sent. Drained: its drain ended (the step is, or ``terminating`` was,
    ``undo_terminating``: the pass reads no command then) or is recorded (storm seed 152141)."""
    if step.undo_command_id is None:
        return False
    ended = terminating or step.state is StepState.UNDO_TERMINATING
    if not ended and p.unsent(step.undo_command_id):
        return False
    command_id = p.command_id(step, UNDO_UNCORDON_COMMAND_SUFFIX)
    command = p.command(step, CommandKind.UNCORDON, spare, p.node_name(spare), command_id, UNCORDON_SECONDS)
    p.effects.append(SendCommand(command))
    return True


def absorb(p: Context, group: GroupSurge, facts: GroupFacts) -> None:
    """A surge unit MinSize keeps (kOps or a person raised MinSize above ``original_desired + raised - 1`` under the
    surge): it becomes the group's own, ``original_desired`` + 1 (the caller lowers ``raised``), so desired capacity
    stays ``original_desired + raised`` and nothing asks Auto Scaling for a decrement it refuses."""
    group.original_desired += 1
    minimum = floor(group, facts)
    p.change(f"{group.name}: MinSize {minimum} keeps a surge unit: the group's own size is {group.original_desired}")


def reissued_undo_id(command_id: str) -> str:
    """The id of the undo drain sent again after ``command_id`` never ran: ``...-undo-<n>``, ``n`` one more than
    ``command_id``'s (2 after the first). Pure."""
    base = command_id.rpartition("-")[0]
    n = drain_number(base, command_id) if base.endswith(f"-{UNDO_COMMAND_SUFFIX}") else None
    return f"{command_id}-2" if n is None else f"{base}-{n + 1}"
