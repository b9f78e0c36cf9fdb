"""A refresh run's intent and progress: the ``RUN#<run id>`` item, its steps and their states.

The refresher (``lambdas/refresher``) replaces instances one step at a time. Every change it makes to AWS is
written here *before* it is made (the step moves to a state naming the intent, with ``intent_at``), so an invocation
that crashes anywhere leaves a record the next invocation completes: it re-reads the world, sees whether the
intended effect happened, and redoes it only when it did not and the intent is older than the effect grace period.

Step states (``StepState``)::

    worker: pending -> surging -> draining -> terminating -> done
                          |           | drain timed out under "pause", or run cancelled while surging
                          |           '-> terminating without decrement, its surge unit handed to the group's
                          |               next pending step (pending -> surging, no raise) -> done
                          v           v
                        undoing -> undo_draining -> undo_terminating -> undone     (the surge is given back)
    master: pending -> draining -> terminating -> settling -> done
                          | drain timed out under "pause" -> kept                   (never surged)
                                                      | masters not Ready in time -> failed (the run pauses)
    any pending step of a run that stops -> skipped

**Deadlines.** Every wait of a run has one (``WaitDeadline``; the seconds are ``RefresherSettings``'): when a step has
waited longer than its deadline, the run pauses with the reason and the step gives its surge back (a spare that launched
but never registered is terminated with decrement); a give-back past its own (``give_back``) leaves the unit raised and
recorded, and the run ends ``failed``. ``RunStep.waiting_since`` records when each wait began. The first replacement of
a run is a canary: until one step is ``done`` no second step starts, so a replacement that never becomes Ready stops
the run before it touches another instance.

**The cluster lock** is held for one decision pass of one invocation, never between invocations (DESIGN.md, "A refresh
and compensation share the lock"): the run's whole state is here, and the groups it is busy with (``Run.busy_groups``)
are left alone by the replenisher, which neither counts the run's surge as a shortfall nor picks such a group as a
donor.

**Surge units.** A worker step in flight holds one surge unit (``RunStep.holds_unit``) and ``GroupSurge.raised`` counts
them: a step adds its unit when it starts surging and gives it back exactly once, by its old instance's termination with
decrement, or by giving its spare back. A drained step whose group has a pending step that may start hands its unit over
instead (``RunStep.handed_over_to``): its old instance is terminated without decrement, Auto Scaling's replacement is
the successor's spare, and ``raised`` does not move (DESIGN.md, "A worker step hands its surge unit to the next").

The run's ``surge`` map says how much desired capacity the run added on top of each group's own (``raised``; desired
capacity = ``original_desired + raised``) and whether it had to raise MaxSize. Other capacity operations (the
replenisher) read it, with ``surge_instance_ids``, so never judge its spares surplus; they see its cluster lock too.

Writes are optimistic: every save is conditioned on the ``version`` read, so two invocations advancing the same run (an
event and the tick) never both record the same transition; the loser re-reads (``RunConflictError``). The table access
is ``adapters.dynamo.runs``."""

from __future__ import annotations

from datetime import datetime
from enum import Enum
from itertools import compress
from operator import attrgetter
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from core.kops import Role
from core.rowcache import RowCache
from core.rowread import unpack
from core.runids import lock_holder
from core.runids import new_invocation_id as new_invocation_id  # re-exported: callers import the ids from here
from core.runids import new_run_id as new_run_id
from core.runids import run_id_of_holder as run_id_of_holder
from core.runrecord import FINAL_DROPS, pack

LOCK_OPERATION = "refresh"  # the cluster lock's ``operation`` while a run holds it
# ``RunOptions.trigger`` of a replacement run: the interruption Lambda's one-instance run for an at-risk instance
# (``REBALANCE_POLICY=replace``); its drains say ``rebalance-replace`` so a Spot warning tightens them.
REBALANCE_TRIGGER = "rebalance"


class RunStatus(str, Enum):
    """Status of a run. ``running``, ``pausing`` and ``cancelling`` are active (the run holds the lock)."""

    RUNNING = "running"
    PAUSING = "pausing"  # a drain failed under the "pause" policy: in-flight steps are being finished or undone
    CANCELLING = "cancelling"  # an operator cancelled: in-flight steps are being finished or undone
    SUCCEEDED = "succeeded"
    PAUSED = "paused"
    CANCELLED = "cancelled"
    FAILED = "failed"

    @property
    def active(self) -> bool:
        return self in (RunStatus.RUNNING, RunStatus.PAUSING, RunStatus.CANCELLING)

    @property
    def stopping(self) -> bool:
        return self in (RunStatus.PAUSING, RunStatus.CANCELLING)


class StepState(str, Enum):
    """State of one step (one old instance to replace); see the module docstring for the transitions."""

    PENDING = "pending"
    SURGING = "surging"  # desired capacity raised for this step; waiting for a new node to be Ready
    DRAINING = "draining"  # drain command sent for the old node
    TERMINATING = "terminating"  # TerminateInstanceInAutoScalingGroup asked for the old instance
    SETTLING = "settling"  # master: waiting until every master is Ready on two consecutive checks
    UNDOING = "undoing"  # giving the surge back: choosing what to remove
    UNDO_DRAINING = "undo_draining"  # draining the surge node before removing it
    UNDO_TERMINATING = "undo_terminating"  # terminating the surge instance with decrement
    DONE = "done"  # the old instance was replaced
    UNDONE = "undone"  # the old instance was kept and the surge given back
    KEPT = "kept"  # master whose drain failed under "pause": kept, uncordoned
    SKIPPED = "skipped"  # never started (the run stopped first)
    FAILED = "failed"  # master replaced but the masters were not all Ready before the deadline (the run paused)

    @property
    def final(self) -> bool:
        return self in _FINAL_STATES

    @property
    def in_flight(self) -> bool:
        return self not in _AT_REST_STATES


# set lookups, and the steps in flight found in C (a pass asks each of a 1,000-step run's steps several times)
_FINAL_STATES = frozenset((StepState.DONE, StepState.UNDONE, StepState.KEPT, StepState.SKIPPED, StepState.FAILED))
_AT_REST_STATES = _FINAL_STATES | {StepState.PENDING}
_MOVING, _STATE_OF = (frozenset(StepState) - _AT_REST_STATES).__contains__, attrgetter("state")


class WaitDeadline(str, Enum):
    """The waits of a run that have a deadline (``RefresherSettings.deadline_seconds`` gives each its seconds).

    - ``spare_launch``: a surging step's group launches a new instance (from the surge).
    - ``spare_register``: that instance's node registers (a fresh ``NODE#`` record; from when it was first seen).
    - ``spare_ready``: the registered spare's node is Ready (from when it registered).
    - ``master_ready``: every master is Ready after a master was replaced (from the replacement).
    - ``nodes_ready``: the nodes a step needs Ready besides its own (the masters before a master step; a worker
      group's ``original_desired`` besides those being replaced), e.g. a NotReady node due later in the run.
    - ``group_quiet``: a worker group carrying another operation's capacity (a compensation donor) is given back
      before the run surges it.
    - ``termination``: a drained old instance leaves its group after the run's TerminateInstanceInAutoScalingGroup
      (from the first pass that finds it still in service; a lifecycle hook's wait is not in service).
    - ``give_back``: a surge given back: Auto Scaling launches the instance a step gives back, or a lowering of desired
      capacity reads back (from the first pass that waits for either); a MaxSize restore reads back (from its first
      ask, ``GroupSurge.restore_since``). Past it what is left is left raised, recorded, and the run ends ``failed``.
    """

    SPARE_LAUNCH = "spare_launch"
    SPARE_REGISTER = "spare_register"
    SPARE_READY = "spare_ready"
    MASTER_READY = "master_ready"
    NODES_READY = "nodes_ready"
    GROUP_QUIET = "group_quiet"
    TERMINATION = "termination"
    GIVE_BACK = "give_back"


class DrainTimeoutPolicy(str, Enum):
    """What a run does when the drain of an old node does not finish in time (or fails).

    - ``pause`` (default): the run stops with the reason; the node is uncordoned (the drain command carries
      ``uncordon_on_failure`` and an explicit uncordon command follows); a worker's surge is given back (the spare
      node drained and terminated with decrement), so desired capacity and MaxSize end where they were.
    - ``terminate``: a drain that timed out counts as done once its deadline passed; the instance is terminated
      (as ``kops rolling-update --fail-on-drain-error=false`` does). A drain that *failed* (refused pods, API
      errors) still pauses.
    """

    PAUSE = "pause"
    TERMINATE = "terminate"


class Selection(str, Enum):
    MAX_AGE = "max_age"  # instances launched longer ago than max_age_seconds, or on an outdated launch template
    ALL = "all"  # every instance of the chosen groups


class RunOptions(BaseModel):
    """How a run was asked for (validated request + settings defaults)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    trigger: str = "manual"  # manual | schedule | cli | rebalance (REBALANCE_TRIGGER)
    selection: Selection = Selection.MAX_AGE
    max_age_seconds: int | None = None
    instance_groups: tuple[str, ...] | None = None
    max_surge: int = Field(default=1, ge=1)
    drain_timeout_seconds: int = Field(default=600, ge=1)
    drain_timeout_policy: DrainTimeoutPolicy = DrainTimeoutPolicy.PAUSE


class GroupSurge(BaseModel):
    """One ASG of the run: its sizes when the run started and what the run added."""

    model_config = ConfigDict(extra="ignore")

    name: str
    role: str
    instance_group: str | None = None
    min_size: int  # at the start; raised to the highest MinSize read under its surge units (``worker.track_floor``)
    original_desired: int
    original_max: int
    raised: int = 0  # surge units in place: desired capacity should be original_desired + raised
    max_raised_to: int | None = None  # MaxSize the run set (None: untouched); restored at the group's end
    max_restored: bool = False
    restore_since: datetime | None = None  # the MaxSize restore's first ask (its ``give_back`` deadline counts from it)
    unreturned: int = 0  # surge units not given back by their ``give_back`` deadline: left raised (the run failed)
    max_left: int | None = None  # MaxSize read when its restore's ``give_back`` deadline passed: left raised


# RunStep's fields that hold a list or a map (``working_copy`` copies them; their elements are strings and times)
MUTABLE_STEP_FIELDS = ("surge_baseline", "waiting_since", "entered")


class RunStep(BaseModel):
    """One old instance and how far its replacement went.

    Attributes:
        needs_update: why it was selected: ``max_age``, ``launch_template`` (its version differs from the
            group's, kops' NEEDUPDATE) or ``forced``.
        surge_baseline: the group's instance ids when the surge was asked for (a new instance is one not in it);
            emptied once the step is final (kept, a group of N instances refreshed whole would grow the ``RUN#``
            item as N x N ids, past DynamoDB's 400 KB).
        surge_instance_id: the spare chosen for this step (a new instance of the group, Ready).
        intent_at: when the last effect of the current state was asked for (redone only after the grace period).
        undo_sent_at: when the undo drain was sent under ``undo_command_id`` (its deadline counts from there).
        settle_first_ok_at: master: when all masters were first seen Ready after the replacement.
        waiting_since: ``WaitDeadline`` value -> when the step began that wait (its deadline counts from there).
        entered: ``StepState`` value -> when the step first entered that state (the pass that moved it there;
            ``started_at`` is the first, ``finished_at`` the last). A state the step passed through inside one pass
            is not listed. Empty in records written before it existed.
        spare_ready_at: worker: when the refresher first saw this step's spare Ready (None before).
        handed_over_to: worker: the ``index`` of the step this one handed its surge unit to (its old instance
            terminated without decrement, Auto Scaling's replacement that step's spare); None when it gave its unit
            back itself (or had none).
    """

    model_config = ConfigDict(extra="ignore")

    index: int
    group: str
    role: str
    instance_id: str
    node_name: str | None = None
    needs_update: str = ""
    state: StepState = StepState.PENDING
    surge_baseline: list[str] = Field(default_factory=list)
    surge_instance_id: str | None = None
    command_id: str | None = None
    drain_status: str | None = None
    drain_message: str | None = None
    undo_command_id: str | None = None
    uncordon_command_id: str | None = None
    intent_at: datetime | None = None
    undo_sent_at: datetime | None = None
    settle_first_ok_at: datetime | None = None
    waiting_since: dict[str, datetime] = Field(default_factory=dict)
    entered: dict[str, datetime] = Field(default_factory=dict)
    spare_ready_at: datetime | None = None
    handed_over_to: int | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    note: str = ""

    @property
    def holds_unit(self) -> bool:
        """Whether the step holds a surge unit of its group (one of ``GroupSurge.raised``): a worker step in flight
        that has not handed its unit over (``handed_over_to``). A master never holds one (never surged)."""
        return self.role == Role.NODE.value and self.state.in_flight and self.handed_over_to is None

    def working_copy(self) -> RunStep:
        """A copy that may be changed without changing this step: its lists and maps (``MUTABLE_STEP_FIELDS``) too."""
        copied = self.model_copy()
        for name in MUTABLE_STEP_FIELDS:
            copied.__dict__[name] = type(self.__dict__[name])(self.__dict__[name])
        return copied

    def at_rest(self) -> RunStep:
        """The step as its ``RUN#`` item keeps it: a final one without ``core.runrecord.FINAL_DROPS``."""
        if not self.state.final:
            return self
        return self.model_copy(
            update={f: RunStep.model_fields[f].get_default(call_default_factory=True) for f in FINAL_DROPS}
        )


def _read_copy(step: RunStep) -> RunStep:
    """What a read of a row made before hands out (``core.rowread.unpack``): a step at rest (final, or pending with its
    plan only) itself, shared between reads (no code changes a step at rest in place: ``Context.own``; a test holds
    every pass to it), any other a copy of its own: copying every row was a third of reading a 1,000-step run."""
    return step if not step.state.in_flight else step.working_copy()


class Run(BaseModel):
    """A refresh run (the ``RUN#<run_id>`` item)."""

    model_config = ConfigDict(extra="ignore")

    run_id: str
    cluster: str
    status: RunStatus = RunStatus.RUNNING
    reason: str = ""
    options: RunOptions
    groups: list[GroupSurge] = Field(default_factory=list)
    steps: list[RunStep] = Field(default_factory=list)
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None = None
    waiting: str = ""  # what the run waits for now (status displays)
    cancel_requested: bool = False
    lock_fencing: int | None = None
    version: int = 0
    history_shed: bool = False  # its final steps were saved without their times, notes and node names (``to_item``)

    @model_validator(mode="before")
    @classmethod
    def _from_rows(cls, data: Any) -> Any:
        """An item's steps at rest come as rows (``core.runrecord``): back to steps, in ``index`` order."""
        if not isinstance(data, dict) or "rows" not in data:
            return data
        return unpack(data, RunStep.model_validate, _read_copy)  # a row read before: validated once

    @property
    def holder(self) -> str:
        """The run's holder name without an invocation (``refresher:<run id>``); an invocation's: ``holder_for``."""
        return lock_holder(self.run_id)

    def holder_for(self, invocation: str) -> str:
        """The cluster-lock holder name of one invocation advancing this run (``lock_holder``)."""
        return lock_holder(self.run_id, invocation)

    def group(self, name: str) -> GroupSurge:
        return next(g for g in self.groups if g.name == name)

    @property
    def surge(self) -> dict[str, int]:
        """ASG name -> surge units in place (only groups with some)."""
        return {g.name: g.raised for g in self.groups if g.raised}

    @property
    def busy_groups(self) -> frozenset[str]:
        """Groups whose capacity the run is changing now: a step in flight, surge in place, or MaxSize raised and not
        yet restored. Other capacity operations leave these alone (no donor, no give-back, no cleanup)."""
        if not self.status.active:
            return frozenset()
        busy = {s.group for s in compress(self.steps, map(_MOVING, map(_STATE_OF, self.steps)))}
        busy |= {g.name for g in self.groups if g.raised or (g.max_raised_to is not None and not g.max_restored)}
        return frozenset(busy)

    def units_held(self, group: str) -> int:
        """How many surge units the steps of ``group`` hold (``RunStep.holds_unit``): its ``raised`` after a pass."""
        return sum(1 for s in self.steps if s.group == group and s.holds_unit)

    @property
    def canary_passed(self) -> bool:
        """A replacement of this run finished (``done``): the run may have more than one step in flight."""
        return any(s.state is StepState.DONE for s in self.steps)

    @property
    def surge_instance_ids(self) -> list[str]:
        """Spare instances of this run still in use (in-flight steps)."""
        moving = compress(self.steps, map(_MOVING, map(_STATE_OF, self.steps)))  # found in C
        return sorted({s.surge_instance_id for s in moving if s.surge_instance_id})

    def working_copy(self, moving: list[int] | None = None) -> Run:
        """A copy a decision pass may change without changing this run (``lambdas.refresher.decide.context``): what
        ``model_copy(deep=True)`` gives, at a fraction of its cost (about 10 ms a pass for a 300-step run). Its steps
        in flight (``moving``: their positions, when known) and its groups are copied; ``options`` is frozen and
        shared, and so are the steps at rest (``Context.own``: a test holds a pass to it)."""
        copied = self.model_copy()
        steps = copied.__dict__["steps"] = list(self.steps)
        for k in compress(range(len(steps)), map(_MOVING, map(_STATE_OF, steps))) if moving is None else moving:
            steps[k] = steps[k].working_copy()
        copied.__dict__["groups"] = [g.model_copy() for g in self.groups]
        return copied

    def at_rest(self) -> Run:
        """The run as its ``RUN#`` item keeps it (``RunStep.at_rest``): what ``Run.model_validate(to_item())`` gives
        back (without ``shed``)."""
        return self.model_copy(update={"steps": [s.at_rest() for s in self.steps]})

    def to_item(self, shed: bool = False, cache: RowCache | None = None) -> dict[str, Any]:
        """The ``RUN#`` item's attributes (no keys), as JSON values: the steps at rest as rows with the ``words``
        they name (``core.runrecord``), the others as maps in ``steps`` (default values left out); ``surge`` and
        ``surge_instance_ids`` for the other capacity operations.

        Args:
            shed: final steps keep only what decisions read (``core.runrecord``, ``shed``); the item says so
                (``history_shed``). For a stopping run whose item would not fit otherwise.
            cache: the writer's last rows (``core.rowcache``): the same item, its rows the cache's (not to change).
        """
        shed = shed or self.history_shed
        item = self.model_dump(mode="json", exclude={"steps", "history_shed"})
        rows, words, maps = (cache.pack if cache else pack)(self.steps, self.groups, self.created_at, shed, self.run_id)
        item["steps"] = [s.at_rest().model_dump(mode="json", exclude_defaults=True) for s in maps]
        if rows:
            item["rows"], item["words"] = rows, words
        if shed:
            item["history_shed"] = True
        item["surge"] = {
            g.name: {"original_desired": g.original_desired, "original_max": g.original_max, "raised": g.raised}
            for g in self.groups
            if g.raised or g.max_raised_to
        }
        item["surge_instance_ids"] = sorted({s.surge_instance_id for s in maps if s.state.in_flight} - {None, ""})
        return item
