"""The replacement of an old instance, worker or master (rules 3 and 4): its drain's outcome decides between
terminating it and pausing the run; then it must leave its group. A drain a Spot warning tightened that timed out
counts as done (``reclaimed``): the instance goes at the Spot deadline anyway. A worker's old instance that leaves
its group by other means than the run's termination with decrement (Spot reclaimed it during its drain, or before
the run's termination reached it) leaves the surge unit in place: ``left_group`` gives it back. A group at MinSize
(raised by kOps under the surge) refuses the decrement: the old instance goes without it and the unit becomes the
group's own (``decrementable``). Pure."""

from __future__ import annotations

from core.kops import Role
from core.model import CommandKind, CommandStatus
from core.runs import DrainTimeoutPolicy, RunStatus, RunStep, StepState, WaitDeadline
from lambdas.refresher.decide.context import (
    RECLAIMED_NOTE,
    UNCORDON_COMMAND_SUFFIX,
    UNCORDON_SECONDS,
    Context,
    WaitKind,
)
from lambdas.refresher.decide.handover import hand_over, successor, take_back
from lambdas.refresher.decide.undo import give_back_unit
from lambdas.refresher.decide.worker import decrements_asked, floor
from lambdas.refresher.plan import Metric, SendCommand, TerminateInstance
from lambdas.refresher.select import masters_not_ready
from lambdas.refresher.world import GroupFacts

_REPLACING = (StepState.DRAINING, StepState.TERMINATING)


def draining(p: Context, step: RunStep) -> None:
    """A step draining its old node: resend a drain not taken up; on success (or a timeout under ``terminate``)
    terminate the old instance (a worker's with decrement, or without when it hands its surge unit to the group's
    next step: ``handover``); on failure pause the run, uncordon the node and give the surge back (workers)."""
    assert step.command_id is not None
    facts = p.facts(step)
    worker = step.role == Role.NODE.value
    if worker and (facts is None or not facts.has_live(step.instance_id)):
        if facts is not None and step.surge_instance_id is not None and facts.has_live(step.surge_instance_id):
            # reclaimed under its drain (a Spot warning took the drain over): its spare, Ready and taking its pods,
            # replaced it; only the surge unit is left to give back
            left_group(p, step, facts)
            return
        step.state = StepState.UNDOING
        step.note = "the old instance left its group during the drain: surge given back"
        p.change(f"step {step.index} undoing: {step.note}")
        return
    if p.unsent(step.command_id):
        if p.older_than_grace(step.intent_at):
            step.intent_at = p.now
            p.effects.append(SendCommand(p.drain_command(step)))
            p.change(f"step {step.index}: drain command {step.command_id} not taken up, send it again")
        else:
            p.wait(WaitKind.EFFECT, f"the agent to take drain command {step.command_id} up")
        return
    status, message = p.drain_outcome(step, step.command_id)
    if status is None:
        p.wait(WaitKind.DRAIN, f"drain of {step.node_name or step.instance_id}" + (f": {message}" if message else ""))
        return
    timed_out = status == CommandStatus.TIMED_OUT.value
    proceed = status in (CommandStatus.SUCCEEDED.value, CommandStatus.SKIPPED.value) or (
        timed_out and (p.run.options.drain_timeout_policy is DrainTimeoutPolicy.TERMINATE or reclaimed(p, step))
    )
    if step.drain_status != status:
        step.drain_status, step.drain_message = status, message
    if not proceed:
        who = step.node_name or step.instance_id
        give_up(p, step, f"drain of {who} {status}: {message}".rstrip(": "), f"drain {status}")
        return
    if worker:
        group = p.run.group(step.group)
        assert facts is not None
        exclude = p.olds_being_replaced(step.group)
        if p.ready_besides(facts, exclude) < group.original_desired:
            what = (
                f"{group.name} to have {group.original_desired} Ready nodes "
                f"besides those being replaced before terminating {step.instance_id}"
            )
            if p.overdue(step, WaitDeadline.NODES_READY, what):
                give_up(p, step, p.run.reason, f"{WaitDeadline.NODES_READY.value} deadline passed")
            else:
                p.wait(WaitKind.NODE_READY, what)
            return
        p.end_wait(step, WaitDeadline.NODES_READY)
        to = None if unit_taken(p, step, facts) else successor(p, step, facts)  # a unit taken is not handed on
        if to is not None:
            hand_over(p, step, to, facts)
            return
    elif not masters_ready_besides(p, step):
        return
    step.state = StepState.TERMINATING
    step.intent_at = p.now
    decrement = worker and facts is not None and decrementable(p, step, facts) and not unit_taken(p, step, facts)
    p.effects.append(TerminateInstance(step.group, step.instance_id, decrement=decrement))
    p.change(f"step {step.index}: drain {status}, terminate {step.instance_id}" + absorbed_note(worker, decrement))


def masters_ready_besides(p: Context, step: RunStep) -> bool:
    """Whether drained master ``step`` may be terminated: every other master is Ready now (invariant 2). Its start
    asked that only before the drain, and a master can go NotReady during it: terminating this one then would leave
    the control plane two members short. Else wait for them on the step's ``nodes_ready`` deadline; past it the run
    pauses and this master is kept, uncordoned (``give_up``). Fresh membership only: under a stale mark the records
    aged out and nothing counts as Ready, so the master waits for the agent's word."""
    problems = masters_not_ready(p.world, besides=step.instance_id)
    if not problems:
        p.end_wait(step, WaitDeadline.NODES_READY)
        return True
    what = f"masters to be Ready before terminating {step.instance_id}: " + "; ".join(problems)
    if p.overdue(step, WaitDeadline.NODES_READY, what):
        give_up(p, step, p.run.reason, f"{WaitDeadline.NODES_READY.value} deadline passed")
    else:
        p.wait(WaitKind.NODE_READY, what)
    return False


def reclaimed(p: Context, step: RunStep) -> bool:
    """The step's drain was tightened to a Spot warning's deadline (its ``CMD#`` item has ``deadline_tightened_to``,
    written by the interruption Lambda): the instance is reclaimed at that deadline whatever the run does, so a drain
    that timed out is not a reason to keep it (the run terminates it and keeps its spare, instead of uncordoning a
    doomed node and giving the spare back)."""
    item = p.world.commands.get(step.command_id or "") or {}
    return bool(item.get("deadline_tightened_to"))


def give_up(p: Context, step: RunStep, reason: str, what: str) -> None:
    """Keep the old instance of a step whose node was drained (or being drained): pause the run with ``reason``,
    uncordon the node (an explicit command beside the drain's ``uncordon_on_failure``) and give a worker's surge back;
    a master is kept. A worker step that handed its surge unit over (``handed_over_to``) takes it back while the
    successor still waits for the spare this instance's termination would have launched (``handover.take_back``),
    and gives it back with its own spare; once the successor has its spare, the step is kept and the unit is the
    successor's."""
    p.stop_run(RunStatus.PAUSING, reason)
    step.uncordon_command_id = p.command_id(step, UNCORDON_COMMAND_SUFFIX)
    p.effects.append(
        SendCommand(
            p.command(
                step,
                CommandKind.UNCORDON,
                step.instance_id,
                p.node_name(step.instance_id, step),
                step.uncordon_command_id,
                UNCORDON_SECONDS,
            )
        )
    )
    if step.role == Role.NODE.value and step.handed_over_to is not None:
        to = next((s for s in p.run.steps if s.index == step.handed_over_to), None)
        if to is None or not take_back(p, step, to):
            note = f"{what}: node kept and uncordoned, its surge unit is step {step.handed_over_to}'s"
            p.finish_step(step, StepState.UNDONE, note)
            return
    if step.role == Role.NODE.value:
        step.state = StepState.UNDOING
        step.note = f"{what}: node uncordoned, surge given back"
        p.change(f"step {step.index} undoing: {step.note}")
    else:
        p.finish_step(step, StepState.KEPT, f"{what}: master kept and uncordoned")


def terminating(p: Context, step: RunStep) -> None:
    """A step terminating its old instance: done (workers) or settling (masters) once it left its group; else
    terminate it again after the grace period, with the same decrement choice (none for a master, nor for a worker
    that handed its surge unit over: its unit is the successor's, ``raised`` is left as it is); a master only while
    every other master is Ready (``masters_ready_besides``: one may have gone NotReady since the first ask, storm seed
    189175)."""
    facts = p.facts(step)
    worker = step.role == Role.NODE.value
    if facts is None or not facts.has_live(step.instance_id):
        p.end_wait(step, WaitDeadline.TERMINATION)
        if worker and step.handed_over_to is not None:
            p.finish_step(step, StepState.DONE, "replaced")
            p.effects.append(Metric("NodesReplaced"))
        elif worker and facts is not None:
            left_group(p, step, facts)
        elif worker:
            p.run.group(step.group).raised -= 1
            p.finish_step(step, StepState.DONE, "replaced")
            p.effects.append(Metric("NodesReplaced"))
        else:
            step.state = StepState.SETTLING
            step.settle_first_ok_at = None
            p.change(f"step {step.index}: master {step.instance_id} gone, wait for the masters to settle")
        return
    if p.overdue(step, WaitDeadline.TERMINATION, f"{step.instance_id} to leave {step.group}"):
        p.end_wait(step, WaitDeadline.TERMINATION)
        what = f"{WaitDeadline.TERMINATION.value} deadline passed: {step.instance_id} still in service"
        give_up(p, step, p.run.reason, what)
        return
    if p.older_than_grace(step.intent_at):
        if not worker and not masters_ready_besides(p, step):
            return  # a master went NotReady since the terminate was asked (refused, lost): asked again once all Ready
        step.intent_at = p.now
        own = worker and step.handed_over_to is None
        decrement = own and decrementable(p, step, facts) and not unit_taken(p, step, facts)
        p.effects.append(TerminateInstance(step.group, step.instance_id, decrement=decrement))
        extra = absorbed_note(own, decrement)
        p.change(f"step {step.index}: {step.instance_id} still in service, terminate it again{extra}")
    else:
        p.wait(WaitKind.TERMINATION, f"{step.instance_id} to leave {step.group}")


def left_group(p: Context, step: RunStep, facts: GroupFacts) -> None:
    """A worker step's old instance is no longer live in its group, its spare stays: the step is replaced (``done``),
    and its surge unit is given back exactly once (invariant 4): by the run's termination with decrement (the usual
    end), else (Spot reclaimed the instance; Auto Scaling keeps the desired capacity and launches a replacement for
    it) as ``undo.give_back_unit`` says, the step ending ``done`` (``RECLAIMED_NOTE``) once it is."""
    group = p.run.group(step.group)
    target = group.original_desired + group.raised - 1
    decremented = facts.desired <= target
    note = "replaced" if decremented else f"{RECLAIMED_NOTE}: spare kept"
    if not decremented and floor(group, facts) > target:
        note = f"replaced; MinSize {floor(group, facts)}: the surge unit is {group.name}'s own now"
    if not give_back_unit(p, step, facts, f"{RECLAIMED_NOTE}: spare {step.surge_instance_id} kept"):
        return
    group.raised -= 1
    p.finish_step(step, StepState.DONE, note)
    p.effects.append(Metric("NodesReplaced"))


def unit_taken(p: Context, step: RunStep, facts: GroupFacts) -> bool:
    """Whether desired capacity no longer holds the surge unit of worker ``step``, whose old instance is still live:
    at most ``original_desired + raised - 1``. kOps (or a person) lowered MaxSize or desired capacity under the
    surge: Auto Scaling clamped desired capacity and removed an instance of its choosing. A termination with decrement
    would then remove a second instance, leaving the group below the size kOps set (invariant 4): the old instance
    goes without decrement (Auto Scaling replaces it, as at MinSize: ``decrementable``), and the unit counts as given
    back once it left (``left_group``: desired capacity reads at most that value). Judged only while ``step`` is the
    one step of its group holding a unit (as with ``max_surge`` 1, the default): with others, desired capacity below
    that also reads as their own units in motion (a raise not visible yet, which ``worker.surging`` redoes; a
    decrement or lowering not counted yet): only a MaxSize below ``original_desired + raised`` says units are gone,
    as many as it lacks, taken by the group's replacements in ``index`` order (none while a step of the group surges
    or gives its unit back)."""
    group = p.run.group(step.group)
    held = group.original_desired + group.raised
    holders = [s for s in p.owned() if s.group == step.group and s.holds_unit]
    if all(s is step for s in holders):
        return facts.desired <= held - 1
    # several units: a MaxSize below them is firm (desired capacity cannot hold them, whatever is in motion) unless a
    # step surges (its raise, MaxSize with it, may not be visible yet) or gives its unit back (``undo.taken_back``
    # counts a unit taken its own way): the first ``gone`` replacements with a live old instance, by index, are taken
    if any(s.state not in _REPLACING for s in holders):
        return False
    ranked = [s for s in holders if facts.has_live(s.instance_id)]
    return any(s is step for s in ranked[: max(0, held - facts.max_size)])


def decrementable(p: Context, step: RunStep, facts: GroupFacts) -> bool:
    """Whether Auto Scaling takes a termination with decrement in ``step``'s group: not at MinSize (kOps or a person
    raised MinSize under the surge, now or while the run held units: ``worker.track_floor``). Else the old instance
    is terminated without decrement (Auto Scaling launches its replacement, the group kept at MinSize) and the surge
    unit counts as the group's own once it left (``undo.give_back_unit``): sending the decrement again would be
    refused every grace period (invariant 8)."""
    return facts.desired - 1 - decrements_asked(p, step.group) >= floor(p.run.group(step.group), facts)


def absorbed_note(worker: bool, decrement: bool) -> str:
    return " without decrement: MinSize or a resize keeps the surge unit" if worker and not decrement else ""
