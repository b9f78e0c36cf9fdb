"""What a pass of ``advance_run`` reads and whether the next one is needed, as pure predicates on the run and the
decision (the invocation's loop in ``lambdas.refresher.advance`` applies them)."""

from __future__ import annotations

from itertools import compress, count, repeat
from operator import attrgetter, is_

from adapters.dynamo.table import MAX_ALSO
from core.kops import Role
from core.model import CommandKind
from core.runs import Run, RunStatus, RunStep, StepState
from lambdas.refresher.decide.context import Decision
from lambdas.refresher.plan import Action, Metric, SaveRun, SendCommand, SetCapacity, TerminateInstance


def bookkeeping(actions: list[Action]) -> bool:
    """Whether a decision only records (its ``SaveRun`` and metrics): no AWS call, no command, no lock release."""
    return all(isinstance(a, (SaveRun, Metric)) for a in actions)


def may_start_a_group(run: Run, states: list[StepState] | None = None) -> bool:
    """Whether the next pass may surge a worker group for the first time (no surge, no raised MaxSize, no step in
    flight, a step pending): only then does the decision look at the compensation donors (``decide.lifecycle
    .start_steps`` starts steps of one group only). That group is the run's current one (the first with a step not
    final), or, when the current group has no pending step left, the next group with one: the pass that ends the
    current group's last steps starts the next group in the same pass (``start_steps`` runs after the steps moved
    on), and a donor surged unread would be taken for its own size (``worker.rebase``). ``states``: ``[s.state for s in
    run.steps]``, when the caller has them (``advance_run`` reads them once a pass)."""
    if run.status is not RunStatus.RUNNING:
        return False
    states = list(map(_STATE, run.steps)) if states is None else states  # in C (a thousand steps a pass)
    first = next(compress(count(), map(_NOT_FINAL.__contains__, states)), None)
    if first is None:
        return False
    current = run.steps[first].group
    if _unstarted(run, current, states):
        return True
    groups = list(map(_GROUP, run.steps))
    pending = compress(groups, map(StepState.PENDING.__eq__, states))  # the groups of the pending steps, in order
    following = next(pending, None)
    return following is not None and following != current and _unstarted(run, following, states, groups)


def _unstarted(run: Run, name: str, states: list[StepState], groups: list[str] | None = None) -> bool:
    """Whether worker group ``name`` of ``run`` has not been surged yet: no surge, no raised MaxSize, a step pending
    and none in flight. ``groups``: ``[s.group for s in run.steps]``, when the caller has them."""
    group = next((g for g in run.groups if g.name == name), None)
    if group is None or group.role != Role.NODE.value or group.raised or group.max_raised_to is not None:
        return False
    groups = list(map(_GROUP, run.steps)) if groups is None else groups
    mine = set(compress(states, map(name.__eq__, groups)))  # the group's steps' states
    return StepState.PENDING in mine and mine.isdisjoint(_IN_FLIGHT)


# the states whose decision reads a step's command (its CMD# item), and which command: the drain's outcome
# (``decide.replace.draining``), the spare's drain when a surge is given back (``decide.undo.undo_draining``)
COMMAND_OF_STATE = {StepState.DRAINING: "command_id", StepState.UNDO_DRAINING: "undo_command_id"}


def looked_at_commands(run: Run, states: list[StepState] | None = None) -> list[str]:
    """The ids of the commands the next decision looks at (pure): a draining step's drain, an undo-draining step's
    drain of its spare. A step surging, terminating or settling never reads its command (before, every step in flight
    read both of its commands: about 2 GetItem a replaced node). ``states``: as ``may_start_a_group``'s."""
    # the steps in those states picked in C (a thousand steps a pass, none or one or two of them draining)
    states = list(map(_STATE, run.steps)) if states is None else states
    looked = compress(run.steps, map(COMMAND_OF_STATE.__contains__, states))
    ids = (getattr(s, COMMAND_OF_STATE[s.state]) for s in looked)
    return [i for i in ids if i]


def outcome_by_event(decision: Decision) -> bool:
    """Whether the pass after this applied ``decision`` could only find what an event will report (pure), so the
    invocation need not read the world again: every effect is a drain command (the agent's result event reports
    its outcome; the tick is the safety net for a lost one, and redoes a drain never taken up) or a group's desired
    capacity raised for its surging steps (the spare's "Node Ready" advances the run; the step recorded its launch
    wait at the surge, so the tick enforces that deadline and redoes a raise not visible) or a drained old
    instance terminated without decrement for the step it handed its surge unit to (``decide.handover``: Auto
    Scaling's replacement is that step's spare, whose "Node Ready" advances the run, and that pass sees the old
    instance gone; ending here costs the lock's release, one call, where the read-back pass cost two: the groups
    read and a save), the run still runs, every step in flight drains, surges or terminates so, and every wait left
    is one an event ends (a launch, a node Ready) or a drain. Such a read-back pass would decide on the world this
    pass read plus the commands just recorded: it would find the drains in flight and return (a drain in flight is
    not worth polling for), or, if a spare became Ready meanwhile, the "Node Ready" event of it advances the run."""
    run = decision.run
    effects = [a for a in decision.actions if not isinstance(a, (SaveRun, Metric))]
    if run.status is not RunStatus.RUNNING or not effects:
        return False
    # each step's state as the pass left it (``Decision.states``), read once if the decision has none
    states = list(map(_STATE, run.steps)) if decision.states is None else decision.states
    surging = list(compress(run.steps, map(is_, states, repeat(StepState.SURGING))))  # in C
    givers = list(compress(run.steps, map(is_, states, repeat(StepState.TERMINATING))))  # what ``_giver`` may take
    if not all(_drain(a) or _surge(run, a, surging) or _handed_over(givers, a, surging) for a in effects):
        return False
    if any(w.kind.pollable and not w.kind.evented for w in decision.waits):
        return False
    # every step final or moving so, but the givers: only the steps in another state looked at one by one
    others = compress(run.steps, map(_NOT_SETTLED.__contains__, states))
    return all(_giver(s, surging) for s in others)


_STATE, _GROUP = attrgetter("state"), attrgetter("group")
_NOT_FINAL = frozenset(s for s in StepState if not s.final)
_IN_FLIGHT = frozenset(s for s in StepState if s.in_flight)
# the states of a step that lets the invocation end on an event (``outcome_by_event``): final, or one of these
_MOVING = (StepState.DRAINING, StepState.UNDO_DRAINING, StepState.SURGING, StepState.PENDING)
_NOT_SETTLED = frozenset(s for s in StepState if not s.final and s not in _MOVING)


def _drain(action: Action) -> bool:
    return isinstance(action, SendCommand) and action.command.kind is CommandKind.DRAIN


def _surge(run: Run, action: Action, surging: list[RunStep]) -> bool:
    """A desired capacity raised to what the group's surge adds up to, for a step of it that surges and recorded
    that intent in this decision (a surge or its redo: ``intent_at`` is the decision's time, the run's
    ``updated_at``; ``surging``: the run's steps surging)."""
    if not isinstance(action, SetCapacity) or action.desired is None:
        return False
    group = next((g for g in run.groups if g.name == action.asg_name), None)
    if group is None or group.raised <= 0 or action.desired != group.original_desired + group.raised:
        return False
    return any(s.group == group.name and s.intent_at == run.updated_at for s in surging)


def _giver(step: RunStep, surging: list[RunStep]) -> bool:
    """A step terminating its old instance that handed its surge unit to a step now surging (``decide.handover``;
    ``surging``: the run's steps surging)."""
    if step.state is not StepState.TERMINATING or step.handed_over_to is None:
        return False
    return any(s.index == step.handed_over_to for s in surging)


def _handed_over(terminating: list[RunStep], action: Action, surging: list[RunStep]) -> bool:
    """The termination without decrement of a step (of the run's steps ``terminating``) that handed its surge unit over
    (``_giver``)."""
    if not isinstance(action, TerminateInstance) or action.decrement:
        return False
    return any(s.instance_id == action.instance_id and _giver(s, surging) for s in terminating)


# the items a drain recorded in a ``RUN#`` save's transaction writes: its ``CMD#`` and its two pointers (``ICMD#``,
# ``OCMD#``: ``adapters.dynamo.command_index``)
ITEMS_PER_COMMAND = 3


def recorded_with_save(commands: int) -> bool:
    """Whether ``commands`` drains fit in the transaction of the ``RUN#`` save before them (with their pointers,
    ``ITEMS_PER_COMMAND`` items each, beside the run and the lock: ``adapters.dynamo.table.MAX_ALSO``): the one bound
    both the pass that may give the lock up in that save (``passing``) and the save itself (``execute._save``) use."""
    return ITEMS_PER_COMMAND * commands <= MAX_ALSO


def passing(decision: Decision) -> bool:
    """Whether the pass applying ``decision`` may take the cluster lock and give it up in its ``RUN#`` save's one
    write (``LeaseLock.passing``) (pure): its only effects are drain commands, few enough to be recorded in that
    save's transaction (``recorded_with_save``: 32 drains; with more, their records follow the save and need the
    lock held), and the invocation ends after it (``outcome_by_event``).
    What follows the save is then the SQS message of a command already recorded ``queued``: the agent works from the
    ``CMD#`` item, a lost message is redone by the next pass after the effect grace period (``decide.replace
    .draining``: a command not taken up is sent again), so nothing that follows needs the lock. Saves the release
    write (one a "Node Ready" of a spare, the pass that starts its old node's drain)."""
    effects = [a for a in decision.actions if not isinstance(a, (SaveRun, Metric))]
    return (
        bool(effects)
        and recorded_with_save(len(effects))
        and all(_drain(a) for a in effects)
        and outcome_by_event(decision)
    )
