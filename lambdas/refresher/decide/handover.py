"""A drained worker step hands its surge unit to the next step of its group (DESIGN.md, "A worker step hands its
surge unit to the next"). Pure.

Without it every worker step costs a raise of desired capacity (``UpdateAutoScalingGroup``) and a termination with
decrement, and the next step raises again. With it, a step whose old node was drained terminates its old instance
*without* decrement when its group has a pending step that may start now: Auto Scaling launches a replacement for
it, and that launch is the successor's spare. The unit moves, it is not added: ``GroupSurge.raised`` does not
change, the finished step records its successor (``RunStep.handed_over_to``) and ends ``done`` once its instance
left the group without lowering ``raised`` (``replace.terminating``). The successor starts ``surging`` with the unit
(its baseline is the group's instances but the one terminated, so the replacement is new to it); everything that
gives a surge back (its undo, a reclaim) then gives that one unit back once, as for a step that raised its own.
"""

from __future__ import annotations

from itertools import compress, repeat
from operator import attrgetter, is_

from core.kops import Role
from core.runs import RunStatus, RunStep, StepState
from lambdas.refresher.decide.context import Context
from lambdas.refresher.plan import TerminateInstance
from lambdas.refresher.world import GroupFacts

_INSTANCE_ID = attrgetter("instance_id")


def successor(p: Context, step: RunStep, facts: GroupFacts) -> RunStep | None:
    """The pending step of ``step``'s group that may take its surge unit now, or None (``step`` then gives it back).

    One may only while the run runs (not pausing, not cancelling), after its canary replacement is ``done`` (until
    then one step alone: ``worker.start_workers``), within the surge limit (the group's units held by the other steps,
    plus this one, at most ``min(max_surge, surge_limit)``: the count does not change), and only a worker step whose
    old instance is still live in the group (the first such step in ``index`` order, as ``start_workers`` takes them).
    """
    run = p.run
    if step.role != Role.NODE.value or run.status is not RunStatus.RUNNING or not run.canary_passed:
        return None
    limit = min(run.options.max_surge, p.settings.surge_limit)
    others = sum(1 for s in p.in_flight() if s is not step and s.group == step.group and s.holds_unit)  # in flight
    if others + 1 > limit:
        return None
    pending = compress(run.steps, map(is_, p.states(), repeat(StepState.PENDING)))  # in C, in order
    return next((s for s in pending if s.group == step.group and facts.has_live(s.instance_id)), None)


def hand_over(p: Context, step: RunStep, to: RunStep, facts: GroupFacts) -> None:
    """Terminate ``step``'s drained old instance without decrement and start ``to`` surging with its unit (no raise:
    ``raised`` unchanged). ``to``'s baseline is the group's instances now but ``step``'s (``successor_baseline``), so
    Auto Scaling's replacement of it is a new instance to ``to`` (``Context.new_instances``)."""
    to = p.own(to)  # a pending step: the run read's until this pass copies it
    step.state = StepState.TERMINATING
    step.intent_at = p.now
    step.handed_over_to = to.index
    to.state = StepState.SURGING
    to.started_at = to.intent_at = p.now
    to.surge_baseline = successor_baseline(p, step, to, facts)
    p.effects.append(TerminateInstance(step.group, step.instance_id, decrement=False))
    p.change(
        f"step {step.index}: drain {step.drain_status}, terminate {step.instance_id} without decrement: its surge unit "
        f"goes to step {to.index} ({to.instance_id}), whose spare is Auto Scaling's replacement"
    )


def successor_baseline(p: Context, step: RunStep, to: RunStep, facts: GroupFacts) -> list[str]:
    """``to``'s ``surge_baseline`` when ``step`` hands it its unit: the group's instances now (ids in C, hundreds) but
    ``step``'s old one, whose replacement is ``to``'s spare, and but those new to another step of the group still
    waiting for its spare (``Context.new_instances``): an earlier hand-over's replacement, launched before this one's,
    is either step's to claim. In this baseline, the earlier step could claim this hand-over's replacement and leave
    ``to`` none: it waited for a launch that never came, its unit left raised (resize seed 364029). Pure."""
    waiting = [
        s
        for s in p.in_flight()
        if s is not step and s is not to and s.group == step.group and s.surge_instance_id is None and s.surge_baseline
    ]
    theirs = {iid for s in waiting for iid in p.new_instances(s, facts)}
    return sorted(iid for iid in map(_INSTANCE_ID, facts.instances) if iid != step.instance_id and iid not in theirs)


def take_back(p: Context, giver: RunStep, to: RunStep) -> bool:
    """Undo ``giver``'s hand-over to ``to`` when the giver's old instance is kept (its termination never happened,
    ``replace.give_up``) and ``to`` still has no spare, surging or already giving its surge back (a cancel): that
    spare was to be Auto Scaling's replacement of the kept instance, so it never launches, and ``to`` would wait for a
    unit it cannot give back. The unit is the giver's again (it gives it back with its own spare, ``undo.undoing``);
    ``to`` returns to ``pending``, its old node untouched (the run is stopping: it ends ``skipped``). False (nothing
    changed) once ``to`` has a spare or moved on: then the unit is its own."""
    if to.state not in (StepState.SURGING, StepState.UNDOING) or to.surge_instance_id is not None:
        return False
    to = p.own(to)  # in flight: the pass's copy already
    giver.handed_over_to = None
    to.state = StepState.PENDING
    to.started_at = to.intent_at = None
    to.surge_baseline = []
    to.waiting_since = {}
    to.note = ""
    p.change(f"step {to.index}: step {giver.index}'s surge unit taken back (its old instance was kept): pending again")
    return True
