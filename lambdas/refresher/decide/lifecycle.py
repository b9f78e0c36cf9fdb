"""The run's lifecycle in one pass: stop it (cancel), move every step on (terminations first; a wait past its
deadline pauses the run), start new steps, skip those a stopping run will not start, restore MaxSize of finished
groups, end the run (``failed`` when it left capacity raised past a ``give_back`` deadline) and release the lock.
Pure."""

from __future__ import annotations

from collections.abc import Callable
from itertools import compress, repeat
from operator import is_, is_not

from core.kops import Role
from core.runs import Run, RunStatus, RunStep, StepState, WaitDeadline
from lambdas.refresher.decide.context import Context, Decision, WaitKind
from lambdas.refresher.decide.master import settling, start_master
from lambdas.refresher.decide.replace import draining, terminating
from lambdas.refresher.decide.undo import undo_draining, undo_terminating, undoing
from lambdas.refresher.decide.worker import floor, start_workers, surging, track_floor
from lambdas.refresher.plan import Action, Metric, MetricUnitName, ReleaseLock, SaveRun, SetCapacity
from lambdas.refresher.summary import left_raised

_FINAL = frozenset(s for s in StepState if s.final)
_NOT_FINAL = frozenset(StepState) - _FINAL


def start_steps(p: Context) -> None:
    """Start the next steps of the first group not finished: one master at a time, workers up to ``max_surge``."""
    states = p.states()
    first = next(compress(p.run.steps, map(_NOT_FINAL.__contains__, states)), None)
    if first is None:
        return
    current = first.group
    mine = list(map(current.__eq__, p.groups()))
    steps = list(compress(p.run.steps, mine))
    role = steps[0].role
    if role == Role.CONTROL_PLANE.value:
        if any(s.role == role for s in p.in_flight()):
            return
        step = next(s for s in steps if s.state is StepState.PENDING)
        start_master(p, step)
        return
    start_workers(p, current, steps, list(compress(states, mine)))


def finish_groups(p: Context) -> None:
    """Restore the MaxSize of each group whose steps are all final and whose surge is all given back.

    The restore counts as done only when a later pass reads it back: while the group's MaxSize is still one the run
    raised (above the original, at most ``max_raised_to``: the executor may have clamped the raise), the pass asks
    for the original again and waits (a refused or throttled UpdateAutoScalingGroup is retried, never taken as
    done), within the ``give_back`` deadline from its first ask (``GroupSurge.restore_since``): past it, refused for
    good, MaxSize is left as read (``max_left``), the run stops and ends ``failed`` naming it. Any other MaxSize (the
    original, a group gone, or a value kOps or a person set since; one MinSize holds up, as the executor's clamp
    leaves it) ends the restore: the run does not fight a reset. A unit left raised (``GroupSurge.unreturned``) keeps
    MaxSize at the group's desired capacity it raised, recorded (``max_left``): a lower MaxSize would clamp it."""
    unfinished = set(compress(p.groups(), map(_NOT_FINAL.__contains__, p.states())))  # groups of a step not final
    limit = p.settings.deadline_seconds(WaitDeadline.GIVE_BACK)
    for group in p.run.groups:
        if group.max_raised_to is None or group.max_restored or group.name in unfinished:
            continue
        if group.raised:
            continue
        facts = p.world.groups.get(group.name)
        # a unit left raised (``unreturned``) or one MinSize made the group's own (``undo.absorb``) is the group's
        # desired capacity now and holds MaxSize up as well: a MaxSize below it would clamp desired capacity, and Auto
        # Scaling would terminate an instance undrained (resize seed 340200)
        keep = max(group.original_max, group.original_desired)
        # MinSize above the original (kOps grew the group meanwhile, ``worker.floor``) holds MaxSize up: the executor
        # clamps the restore to it, so a MaxSize at or below MinSize is read back as restored, never asked again
        if facts is not None and max(keep, floor(group, facts)) < facts.max_size <= group.max_raised_to:
            if group.restore_since is None:
                group.restore_since = p.now  # the restore's deadline counts from its first ask
                p.change(f"{group.name}: MaxSize restore to {keep} asked")
            if (p.now - group.restore_since).total_seconds() <= limit:
                p.effects.append(SetCapacity(group.name, max_size=keep))
                p.wait(WaitKind.EFFECT, f"{group.name}: MaxSize back to {keep} (read back next pass)")
                continue
            # refused for good (AccessDenied, a validation error): left raised, recorded, the run ends failed
            group.max_restored, group.max_left = True, facts.max_size
            p.stop_run(
                RunStatus.PAUSING,
                f"{WaitDeadline.GIVE_BACK.value} deadline ({limit} s) passed: MaxSize of {group.name} still "
                f"{facts.max_size}, not restored to {keep}",
            )
            p.change(f"{group.name}: MaxSize restore not read back in {limit} s: left at {facts.max_size}")
            continue
        group.max_restored = True
        # kept up for a unit left raised: recorded, the operator's to lower
        if (
            group.unreturned
            and facts is not None
            and (max(group.original_max, floor(group, facts)) < facts.max_size <= group.max_raised_to)
        ):
            group.max_left = facts.max_size
        actual = "group gone" if facts is None else f"MaxSize {facts.max_size}"
        p.change(f"{group.name}: MaxSize restore read back ({actual}; original {group.original_max})")


def restoring(run: Run) -> bool:
    """A group whose surge is all given back still waits for its MaxSize restore to be read back."""
    return any(g.max_raised_to is not None and not g.max_restored and g.raised == 0 for g in run.groups)


def skip_pending(p: Context) -> None:
    """A stopping run starts nothing more: its pending steps are skipped."""
    run = p.run
    if run.status.stopping:
        for step in list(compress(run.steps, map(is_, p.states(), repeat(StepState.PENDING)))):
            p.finish_step(p.own(step), StepState.SKIPPED, f"run {run.status.value}")


def finish_run(p: Context) -> None:
    """End the run once every step is final (after ``finish_groups`` restored MaxSize); release the lock."""
    run = p.run
    if not all(map(_FINAL.__contains__, p.states())) or restoring(run):
        return
    final = {
        RunStatus.RUNNING: RunStatus.SUCCEEDED,
        RunStatus.PAUSING: RunStatus.PAUSED,
        RunStatus.CANCELLING: RunStatus.CANCELLED,
    }[run.status]
    left = left_raised(run)
    if left:  # capacity left raised past its ``give_back`` deadline: the run failed, whatever stopped it
        final = RunStatus.FAILED
        run.reason = "; ".join([run.reason] * bool(run.reason) + [f"left raised: {n} {w}" for n, w in left.items()])
    run.status = final
    run.finished_at = p.now
    run.waiting = ""
    p.change(f"run {final.value}" + (f": {run.reason}" if run.reason else ""))
    p.effects.append(ReleaseLock(run.run_id))
    p.effects.append(Metric("RunDuration", (p.now - run.created_at).total_seconds(), MetricUnitName.SECONDS))
    if final is not RunStatus.SUCCEEDED:
        p.effects.append(Metric("RunsCancelled" if final is RunStatus.CANCELLED else "RunFailures"))
    if left:
        units = sum(g.unreturned + (g.max_left is not None) for g in run.groups)
        p.effects.append(Metric("CapacityLeftRaised", units))


def decide_pass(p: Context) -> Decision:
    """One pass over the run (rules in the package docstring): the decision with the run saved first if it changed."""
    run = p.run
    if not run.status.active:
        return Decision(run)
    if run.cancel_requested and run.status is RunStatus.RUNNING:
        p.stop_run(RunStatus.CANCELLING, "cancelled by an operator")
    handlers: dict[StepState, Callable[[Context, RunStep], None]] = {
        StepState.TERMINATING: terminating,
        StepState.UNDO_TERMINATING: undo_terminating,
        StepState.SETTLING: settling,
        StepState.DRAINING: draining,
        StepState.UNDO_DRAINING: undo_draining,
        StepState.SURGING: surging,
        StepState.UNDOING: undoing,
    }
    # each step's state by its place (a pass never adds, drops or moves a step: ``Context.own`` puts its copy in the
    # step's place)
    was = p.states()
    track_floor(p)  # before any step compares desired capacity with MinSize
    # terminations first: they give surge units back before anything compares desired capacity. Each state's steps
    # found among the steps the pass owns, the only ones in flight (``Context.in_flight``; the handlers' states are
    # all in flight), when its turn comes: a handler may move a step into a later one
    for state in handlers:
        for step in [s for s in p.owned() if s.state is state]:
            handlers[state](p, step)
    if run.status is RunStatus.RUNNING:
        start_steps(p)
    skip_pending(p)
    finish_groups(p)
    finish_run(p)
    if run.status.active:
        # saved with the pass's changes; alone it is no reason to write (a wait's start, which its deadline counts
        # from, is a change of its own: ``Context.overdue``)
        run.waiting = "; ".join(w.what for w in p.waits)
    # when each step entered the state this pass left it in (charts, status): the steps it moved found in C
    states = p.states()
    for step in compress(run.steps, map(is_not, states, was)):
        step.entered.setdefault(step.state.value, p.now)
    actions: list[Action] = []
    if p.changes:
        run.updated_at = p.now
        actions.append(SaveRun(run, tuple(p.changes)))
    actions.extend(p.effects)
    return Decision(run, actions, p.waits if run.status.active else [], states)
