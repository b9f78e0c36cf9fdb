"""What one decision pass over a refresh run works on (``Context``: a mutable copy of the run, the world, the
effects and waits gathered, and the helpers every step uses), and what it returns (``Decision``, ``Wait``). Pure.

**Copy on write.** The run a pass reads is shared: a warm environment hands the same steps to its next pass
(``core.runs._read_copy``, ``adapters.dynamo.runs.RunStore``'s kept run). So the pass's copy (``Run.working_copy``)
copies only the steps in flight and the groups; a step at rest (pending or final) is the read run's own object, and a
rule that changes a pending step first takes the pass's own copy of it (``Context.own``, which puts the copy in the
pass's run in its place). A final step is never changed. Copying every pending step was most of a pass's CPU on a
large run (a 1,000-step run starts with 1,000 of them).

**The steps a pass owns.** So only the steps the pass owns (those in flight when it began, and those ``own`` copied
since) can change: every other step keeps the state it had when the pass began, and only a step the pass owns can be
in flight. ``Context.states`` (each step's state now) is those first states with only the owned steps read again,
and the rules that look for steps in flight look among the owned steps alone: a pass read every step's state (an
attribute of a model a step, hundreds of steps) a dozen times over.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum
from itertools import compress, count, filterfalse, repeat
from operator import attrgetter
from types import SimpleNamespace

from core.clock import aware_time
from core.model import Command, CommandKind, CommandStatus, DrainOptions
from core.runs import (
    REBALANCE_TRIGGER,
    DrainTimeoutPolicy,
    GroupSurge,
    Run,
    RunStatus,
    RunStep,
    StepState,
    WaitDeadline,
)
from core.settings import RefresherSettings
from lambdas.refresher.plan import Action, SaveRun, SetCapacity
from lambdas.refresher.world import GroupFacts, World

_STATE, _GROUP, _INSTANCE_ID = attrgetter("state"), attrgetter("group"), attrgetter("instance_id")
_SERVING = attrgetter("serving")  # ``NodeRecord.serving``: Ready and not under a Spot warning
_NO_NODE = SimpleNamespace(serving=False)  # the record of an instance without one (not Ready)
_IN_FLIGHT = frozenset(s for s in StepState if s.in_flight)
_REPLACING = frozenset((StepState.DRAINING, StepState.TERMINATING))
UNDO_COMMAND_SUFFIX = "undo"
UNCORDON_COMMAND_SUFFIX = "uncordon"
UNDO_UNCORDON_COMMAND_SUFFIX = "undo-uncordon"  # a spare the undo drained, then kept (``undo.taken_back``)
UNDO_DRAIN_SECONDS = 300  # deadline of the drain of a spare being given back
UNCORDON_SECONDS = 900  # an uncordon of a node the run keeps: a lost one is re-sent by the sweeper (after 300 s)
# note of a worker step whose old instance left its group under it (a Spot reclaim) while its spare stayed: the step
# is ``done`` once its surge unit is given back, whatever instance gave it (``replace.left_group``, ``undo``)
RECLAIMED_NOTE = "old instance left its group under the step (reclaimed)"


class WaitKind(str, Enum):
    DRAIN = "drain"  # the agent's result event ends it: return
    NODE_READY = "node_ready"
    LAUNCH = "launch"
    TERMINATION = "termination"
    SETTLE = "settle"
    EFFECT = "effect"  # an intent younger than the grace period: its invocation is probably still at it
    OTHER_OPERATION = "other_operation"  # another capacity operation (a compensation) to finish: return

    @property
    def pollable(self) -> bool:
        return self not in (WaitKind.DRAIN, WaitKind.OTHER_OPERATION)

    @property
    def evented(self) -> bool:
        """An event ends it (the agent's "Node Ready" of the spare, which also ends its launch's wait): polled only
        slowly, as a safety net (``REFRESH_EVENT_WAIT_POLL_SECONDS``)."""
        return self in (WaitKind.LAUNCH, WaitKind.NODE_READY)


@dataclass(frozen=True)
class Wait:
    kind: WaitKind
    what: str
    after_seconds: float | None = None  # poll again no sooner than this (masters' second check)


@dataclass
class Decision:
    """What to do now.

    Attributes:
        run: the run's new state (the input's when nothing changed).
        actions: ``SaveRun`` first when the run changed, then the effects, in order.
        waits: what the run waits for afterwards (empty when it is over or moves on at once).
        states: ``[s.state for s in run.steps]``, from the pass (``Context.states``); None: not known (read them).
    """

    run: Run
    actions: list[Action] = field(default_factory=list)
    waits: list[Wait] = field(default_factory=list)
    states: list[StepState] | None = None

    @property
    def changed(self) -> bool:
        return any(isinstance(a, SaveRun) for a in self.actions)

    @property
    def pollable(self) -> Wait | None:
        """The wait worth polling for, if every wait is (a drain in flight makes polling pointless)."""
        if not self.waits or any(not w.kind.pollable for w in self.waits):
            return None
        return min(self.waits, key=lambda w: w.after_seconds or 0)

    @property
    def evented(self) -> bool:
        """Every wait is one an event ends (``WaitKind.evented``): a poll for it is only the safety net."""
        return bool(self.waits) and all(w.kind.evented for w in self.waits)


class Context:
    """One decision pass: a mutable copy of the run plus the effects and notes gathered."""

    def __init__(
        self, run: Run, world: World, settings: RefresherSettings, now: datetime, states: list[StepState] | None = None
    ) -> None:
        self.world = world
        self.settings = settings
        self.now = now
        self.effects: list[Action] = []
        self.changes: list[str] = []
        self.waits: list[Wait] = []
        # each step's state when the pass began, by position (``states``: the caller's ``[s.state for s in
        # run.steps]``, when it has them), and the positions of the steps the pass owns: those in flight now (copied by
        # ``working_copy``), then each one ``own`` copies (module docstring, "The steps a pass owns")
        self._began = list(map(_STATE, run.steps)) if states is None else list(states)
        self._positions = set(compress(count(), map(_IN_FLIGHT.__contains__, self._began)))
        self.run = run.working_copy(sorted(self._positions))
        steps = self.run.steps
        self._owned = set(map(id, map(steps.__getitem__, self._positions)))
        self._groups: list[str] | None = None  # each step's group, by position (made on demand: no rule changes it)
        self._olds: set[str] | None = None  # every step's old instance (made on demand: no rule changes one)
        self._copies: dict[int, RunStep] = {}  # id of a step at rest of the run read -> the pass's copy of it
        self._places: dict[int, int] | None = None  # id of a step in ``run.steps`` -> its position (made on demand)
        self._ready = world.ready_live  # group -> its facts, its Ready live ids (``ready_live``; shared: the world's)

    def own(self, step: RunStep) -> RunStep:
        """The pass's own copy of ``step`` (a step of its run), to change: ``step`` itself when it is the pass's copy
        already, the copy made before when ``step`` is the step at rest it was made of, else a new
        ``RunStep.working_copy`` put in ``step``'s place in ``run.steps`` (module docstring, "Copy on write"). The
        caller goes on with what this returns.

        Raises:
            ValueError: ``step`` is final (no rule changes a final step) or not a step of the pass's run.
        """
        if id(step) in self._owned:
            return step
        copied = self._copies.get(id(step))
        if copied is not None:
            return copied
        if step.state.final:
            raise ValueError(f"step {step.index} is final: a pass never changes it")
        if self._places is None:
            self._places = dict(zip(map(id, self.run.steps), count()))  # in C
        place = self._places.get(id(step))
        if place is None or self.run.steps[place] is not step:
            raise ValueError(f"step {step.index} is not a step of the pass's run")
        copied = self.run.steps[place] = step.working_copy()
        self._copies[id(step)] = copied
        self._owned.add(id(copied))
        self._positions.add(place)
        return copied

    def states(self) -> list[StepState]:
        """Each step's state now, by position (what ``[s.state for s in run.steps]`` gives): the states the pass began
        with, read again only at the positions of the steps it owns (module docstring, "The steps a pass owns"). A new
        list each call."""
        now = self._began.copy()
        steps = self.run.steps
        for position in self._positions:
            now[position] = steps[position].state
        return now

    def owned(self) -> list[RunStep]:
        """The steps the pass owns, in their order in ``run.steps``: every step in flight is one of them (module
        docstring, "The steps a pass owns"), with the steps ``own`` copied that may be at rest again."""
        steps = self.run.steps
        return [steps[position] for position in sorted(self._positions)]

    def in_flight(self) -> list[RunStep]:
        """The steps in flight now, in their order in ``run.steps`` (among the steps the pass owns)."""
        return [s for s in self.owned() if s.state in _IN_FLIGHT]

    def groups(self) -> list[str]:
        """Each step's group, by position (no rule changes a step's group; read once a pass). Shared: never change
        it."""
        if self._groups is None:
            self._groups = list(map(_GROUP, self.run.steps))
        return self._groups

    def change(self, note: str) -> None:
        self.changes.append(note)

    def wait(self, kind: WaitKind, what: str, after: float | None = None) -> None:
        self.waits.append(Wait(kind, what, after))

    def older_than_grace(self, when: datetime | None) -> bool:
        return when is None or (self.now - when).total_seconds() >= self.settings.effect_grace_seconds

    def facts(self, step: RunStep) -> GroupFacts | None:
        return self.world.groups.get(step.group)

    def command_id(self, step: RunStep, suffix: str = "") -> str:
        base = f"refresh-{self.run.run_id}-{step.index}"
        return f"{base}-{suffix}" if suffix else base

    def command(
        self,
        step: RunStep,
        kind: CommandKind,
        instance_id: str,
        node_name: str | None,
        command_id: str,
        seconds: int,
        uncordon_on_failure: bool = False,
    ) -> Command:
        return Command(
            command_id=command_id,
            cluster=self.run.cluster,
            kind=kind,
            instance_id=instance_id,
            node_name=node_name,
            reason=f"{self.reason_prefix} {self.run.run_id} step {step.index}",
            deadline=self.now + timedelta(seconds=seconds),
            options=DrainOptions(uncordon_on_failure=uncordon_on_failure),
        )

    @property
    def reason_prefix(self) -> str:
        """``refresh``; ``rebalance-replace`` for a replacement run (``core.runs.REBALANCE_TRIGGER``): the
        interruption Lambda tightens a drain whose reason starts with ``rebalance`` to a Spot warning's deadline."""
        return "rebalance-replace" if self.run.options.trigger == REBALANCE_TRIGGER else "refresh"

    def drain_command(self, step: RunStep) -> Command:
        pause = self.run.options.drain_timeout_policy is DrainTimeoutPolicy.PAUSE
        return self.command(
            step,
            CommandKind.DRAIN,
            step.instance_id,
            self.node_name(step.instance_id, step),
            step.command_id or self.command_id(step),
            self.run.options.drain_timeout_seconds,
            uncordon_on_failure=pause,
        )

    def unsent(self, command_id: str) -> bool:
        """The command may never have reached the queue: not recorded, or still ``queued`` (a crash between the
        record and the send). Sending it again is harmless: the agent works a command once, by its ``CMD#``."""
        item = self.world.commands.get(command_id)
        return item is None or item.get("status") == CommandStatus.QUEUED.value

    def node_name(self, instance_id: str, step: RunStep | None = None) -> str | None:
        record = self.world.nodes.get(instance_id)
        if record is not None:
            return record.node_name
        return step.node_name if step is not None and step.instance_id == instance_id else None

    def capacity(self, group: GroupSurge) -> SetCapacity:
        """``group``'s units: MaxSize only raised past the original and the one read (kept if kOps set it: 150835)."""
        desired, facts = group.original_desired + group.raised, self.world.groups.get(group.name)
        if desired <= group.original_max or (facts is not None and desired <= facts.max_size):
            return SetCapacity(group.name, desired=desired)
        group.max_raised_to = max(group.max_raised_to or 0, desired)
        return SetCapacity(group.name, desired=desired, max_size=desired)

    def add_capacity_effect(self, effect: SetCapacity) -> None:
        """Only the last desired value for a group matters (absolute values): replace an earlier one."""
        self.effects = [
            e
            for e in self.effects
            if not (isinstance(e, SetCapacity) and e.asg_name == effect.asg_name and e.desired is not None)
        ]
        self.effects.append(effect)

    def olds_being_replaced(self, group: str) -> set[str]:
        """The old instances of ``group``'s steps draining or terminating (states in flight: among the steps the pass
        owns)."""
        return {s.instance_id for s in self.owned() if s.state in _REPLACING and s.group == group}

    def ready_besides(self, facts: GroupFacts, exclude: set[str]) -> int:
        """How many of the group's live instances (``GroupFacts.live``) not in ``exclude`` are serving nodes (Ready and
        not ending, ``NodeRecord.serving``): found once a pass (``ready_live``), ``exclude`` taken from them. A Ready
        node cordoned for a Spot warning is not capacity: it is reclaimed within two minutes (seed 123033)."""
        ready = self.ready_live(facts)
        return len(ready) - sum(map(exclude.__contains__, ready))

    def ready_live(self, facts: GroupFacts) -> list[str]:
        """The ids of ``facts``' live instances whose node is serving (``NodeRecord.serving``), in their order: found
        once for each group's facts and the world's ``nodes`` (``World.ready_live``: a pass's worlds of the same map
        share them; a step in flight asks for its group's count, hundreds of instances, once or twice a pass), in C
        (each id's record, or ``_NO_NODE``, its ``serving``). Shared: never change it."""
        known = self._ready.get(facts.name)
        if known is not None and known[0] is facts:
            return known[1]
        ids = facts.live_ids
        ready = list(compress(ids, map(_SERVING, map(self.world.nodes.get, ids, repeat(_NO_NODE)))))
        self._ready[facts.name] = (facts, ready)
        return ready

    def claimed_spares(self, but: RunStep) -> set[str]:
        """The spares of the steps in flight but ``but`` (``in_flight``)."""
        return {s.surge_instance_id for s in self.in_flight() if s is not but and s.surge_instance_id}

    def new_instances(self, step: RunStep, facts: GroupFacts) -> list[str]:
        """The ids of ``facts``' live instances that are none of the run's old instances, not in ``step``'s
        ``surge_baseline`` and no other step's spare, in their order: those outside the baseline found in C first (a
        group's hundreds of instances, a pass), the few left looked at one by one."""
        baseline = set(step.surge_baseline)  # a group's instances: a list's ``in`` cost a pass O(group size squared)
        outside = list(filterfalse(baseline.__contains__, facts.live_ids))
        if not outside:
            return outside
        claimed = self.claimed_spares(step)
        if self._olds is None:  # read once a pass: no rule changes a step's old instance
            self._olds = set(map(_INSTANCE_ID, self.run.steps))
        olds = self._olds
        return [i for i in outside if i not in claimed and i not in olds]

    def finish_step(self, step: RunStep, state: StepState, note: str = "") -> None:
        """End ``step`` in the final ``state``; its ``surge_baseline`` is dropped (only a step in flight reads it):
        the ``RUN#`` item keeps at most ``max_surge`` baselines, not one per step, under DynamoDB's 400 KB."""
        step.state = state
        step.finished_at = self.now
        step.surge_baseline = []
        if note:
            step.note = note
        self.change(f"step {step.index} ({step.instance_id}) {state.value}" + (f": {note}" if note else ""))

    def overdue(self, step: RunStep, wait: WaitDeadline, what: str) -> bool:
        """Whether ``step`` has been in ``wait`` past its deadline; records when the wait began (first call). When
        it is overdue, the run pauses with the reason (a cancelling run stays cancelling)."""
        since = step.waiting_since.get(wait.value)
        if since is None:
            step.waiting_since[wait.value] = self.now
            self.change(f"step {step.index}: waiting for {wait.value} ({what})")
            return False
        limit = self.settings.deadline_seconds(wait)
        waited = (self.now - since).total_seconds()
        if waited <= limit:
            return False
        self.stop_run(RunStatus.PAUSING, f"{wait.value} deadline ({limit} s) passed for step {step.index}: {what}")
        return True

    def end_wait(self, step: RunStep, *waits: WaitDeadline) -> None:
        """The step no longer waits for ``waits``: forget when they began (a later wait starts its own clock)."""
        ended = [w.value for w in waits if w.value in step.waiting_since]
        for key in ended:
            del step.waiting_since[key]
        if ended:
            self.change(f"step {step.index}: {', '.join(ended)} wait over")

    def stop_run(self, status: RunStatus, reason: str) -> None:
        if self.run.status is RunStatus.RUNNING:
            self.run.status = status
            self.run.reason = reason
            self.change(f"run {status.value}: {reason}")

    def drain_outcome(self, step: RunStep, command_id: str) -> tuple[str | None, str]:
        """The drain's terminal status ("" message) or None while it runs; a command unfinished long after its
        deadline counts as timed out (the agent is gone). Never raises: an item this pass cannot read (a status
        outside ``CommandStatus``, a ``result`` that is not a map, a ``command.deadline`` that is no ISO 8601 time
        with a zone; the agent partition is written by more than the run) is no outcome yet, with a note as the
        message (for the wait), until the deadline the run gave the drain (``drain_deadline``) passed."""
        item = self.world.commands.get(command_id)
        if item is None:
            return None, ""
        status = next((s for s in CommandStatus if s.value == item.get("status")), None)
        result = item.get("result") or {}
        if status is not None and status.terminal and isinstance(result, Mapping):
            return status.value, str(result.get("message", ""))
        command = item.get("command")
        deadline = aware_time(command.get("deadline") if isinstance(command, Mapping) else None)
        note = ""
        if status is None or status.terminal or deadline is None:
            note = f"its item is unreadable (status {item.get('status')!r}), taken as unfinished"
            deadline = self.drain_deadline(step, command_id)
        if deadline is not None and (self.now - deadline).total_seconds() > self.settings.agent_grace_seconds:
            return CommandStatus.TIMED_OUT.value, "no result from the agent after the deadline" + (
                f" ({note})" if note else ""
            )
        return None, note

    def drain_deadline(self, step: RunStep, command_id: str) -> datetime | None:
        """The deadline the run gave a drain of ``step`` when it sent it (``command``): the undo drain's
        ``UNDO_DRAIN_SECONDS`` from when it was sent under its id (``RunStep.undo_sent_at``: a drain sent again
        under a new id, ``decide.undo.reissued_undo_id``, has a whole deadline of its own), else the run's drain
        timeout; from when the step entered its state (else its last intent) when no send time is recorded (the
        run's drain, an undo drain of a record written before ``undo_sent_at``). None when no time is known."""
        undo = command_id == step.undo_command_id
        since = (step.undo_sent_at if undo else None) or step.entered.get(step.state.value) or step.intent_at
        if since is None:
            return None
        return since + timedelta(seconds=UNDO_DRAIN_SECONDS if undo else self.run.options.drain_timeout_seconds)
