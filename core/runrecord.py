"""How a refresh run's steps are laid out in its ``RUN#`` item: steps at rest as compact rows. Pure.

DynamoDB caps an item at 400 KB, names included ("DynamoDB item sizes and formats"), and a run's whole state is one
item (``core.runs``). Written as maps, a step costs its field names on every step (about 0.5 KB a finished step,
0.2 KB a pending one: a 1,000-step run passed the cap at about its 670th finished step). So a step **at rest** is a
row, a list of values in fixed positions (``ROW``):

- a *pending* step with nothing but its plan (no wait started): ``[index, group, instance_id, node_name,
  needs_update]``;
- a *final* step: the same, then ``state, surge_instance_id, drain_status, note, times_key, commands, t0, d1,
  ...``. A final step keeps what is read of it after it ends (``decide``: its instance and spare; ``status``:
  state, spare, drain, note; the plan table: group, instance, node, why; the chart: ``entered``,
  ``spare_ready_at``, ``settle_first_ok_at``, ``started_at``, ``finished_at``; the scenarios and an operator looking
  for the step's ``CMD#`` items: its command ids), exactly, and drops what only a step in flight reads
  (``FINAL_DROPS``: its surge baseline, wait starts, intent time, the time its undo drain was sent, the drain's
  message, which the run's reason or the step's note already carry when it mattered). ``commands`` is a bit set of
  the step's command ids (``COMMANDS``: drain 1, undo 2, uncordon 4), each of which is
  ``refresh-<run id>-<index>[-<suffix>]``, as the refresher names them; a step with an id of another form stays a
  map. Above those bits, ``commands`` carries a worker step's hand-over (``handed_over_to``, the later step it
  handed its surge unit to) as ``HANDOVER_UNIT x (handed_over_to - index)``: a successor is a later pending step of
  the same group, usually the next, so the number keeps its one or two digits (a step handed over to an earlier
  index stays a map).

In a row, ``group`` is the group's position in the run's ``groups`` (whose ``role`` is the step's); ``node_name`` is
``True`` when it is the instance id (kOps' resource-based node names); ``needs_update``, ``state``,
``drain_status``, ``note`` and ``times_key`` are positions in the item's ``words`` (each distinct string once: a
1,000-step run repeats a handful). ``times_key`` names the times that follow, space-separated, in time order (ties
in the order ``@started``, the ``entered`` states in theirs, ``@finished``, ``@spare_ready``, ``@settle``); ``t0`` is
the first one's offset from the run's ``created_at`` and each next one its offset from the one before, in
microseconds, exact (a number costs a byte per two significant digits: a delta of minutes is 5 bytes, a time that
coincides with the one before 2, an ISO timestamp 27). A step a
row cannot hold exactly (a group not in ``groups``, another role, a timestamp of another kind than ``created_at``'s)
stays a map in ``steps``, as do steps in flight and pending steps with a wait started (the simulation's checker
reads their ``waiting_since`` there). Reading puts all steps back in ``index`` order; an item without ``rows`` (one
written before them) reads as it always did.

``shed`` (a stopping run whose item would not fit otherwise, ``adapters.dynamo.runs``): final rows keep only
``[index, group, instance_id, None, needs_update, state, surge_instance_id]``, what decisions and the other
operations read; status and chart then lack their node names, notes and times.

**Memos.** Every pass of the refresher reads and writes the whole item, and most of a large run's rows do not change
from one pass to the next (a final step never changes; a pending row holds its plan only). So each row is worked out
once for what it holds: ``pack`` keeps a final step's row, words spelled out, keyed by every field the row is made
of (``_PACKED``; ``words`` are then numbered in the order the rows name them, as always), and ``unpack``
(``core.rowread``, the reading side) what the reader made of a row (a validated step, made the second time the row
is read) keyed by the row, its run, ``created_at``, groups and words, handing out a fresh copy each time of a step
that may still change and the same object of a final one (no code changes a final step). Both keys
are the content, never an object's identity: the same content always gives the same row and the same step,
whichever run, seed or process asked first. Each memo is bounded (``MEMO_ROWS``; ``core.rowread``'s ``MEMO_RUNS``
and ``MEMO_ROWS``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any, Protocol, TypeVar

# a row's positions; then the times
ROW = (
    "index",
    "group",
    "instance_id",
    "node_name",
    "needs_update",
    "state",
    "surge_instance_id",
    "drain_status",
    "note",
    "times_key",
    "commands",
)
PENDING = "pending"
# fields only a step in flight reads: a final step drops them
FINAL_DROPS = (
    "surge_baseline",
    "waiting_since",
    "intent_at",
    "drain_message",
    "undo_sent_at",
)
# time fields beside ``entered``, by their key in ``times_key`` (``@started`` comes first, the others after)
EXTRA_TIMES = {"@finished": "finished_at", "@spare_ready": "spare_ready_at", "@settle": "settle_first_ok_at"}
_US = timedelta(microseconds=1)
# a final row's command ids, by bit: the field and the suffix its id carries (lambdas.refresher.decide.context)
COMMANDS = (("command_id", ""), ("undo_command_id", "undo"), ("uncordon_command_id", "uncordon"))
HANDOVER_UNIT = 1 << len(COMMANDS)  # ``commands`` above the command bits: handed_over_to - index
# a row's positions that name a word, in the order a row names them first (``words`` keeps that order); a
# drain_status may be None
WORD_SLOTS = tuple(ROW.index(f) for f in ("needs_update", "drain_status", "state", "note", "times_key"))
# the most rows each memo keeps before it starts again (a few runs of a few thousand steps)
MEMO_ROWS = 50_000
# what a final step holds -> its row, words spelled out (``pack``)
_PACKED: dict[tuple[Any, ...], tuple[Any, ...] | None] = {}


def command_id(run_id: str, index: int, suffix: str = "") -> str:
    """A refresh step's command id as the refresher names it: ``refresh-<run id>-<index>[-<suffix>]``."""
    base = f"refresh-{run_id}-{index}"
    return f"{base}-{suffix}" if suffix else base


class State(Protocol):
    @property
    def value(self) -> str: ...

    @property
    def final(self) -> bool: ...


class StepLike(Protocol):
    """What packing reads of a step (``core.runs.RunStep``)."""

    index: int
    group: str
    role: str
    instance_id: str
    node_name: str | None
    needs_update: str
    surge_baseline: list[str]
    surge_instance_id: str | None
    command_id: str | None
    drain_status: str | None
    drain_message: str | None
    undo_command_id: str | None
    uncordon_command_id: str | None
    intent_at: datetime | None
    undo_sent_at: datetime | None
    settle_first_ok_at: datetime | None
    waiting_since: dict[str, datetime]
    entered: dict[str, datetime]
    spare_ready_at: datetime | None
    handed_over_to: int | None
    started_at: datetime | None
    finished_at: datetime | None
    note: str

    @property
    def state(self) -> State: ...


S = TypeVar("S", bound=StepLike)


class GroupLike(Protocol):
    name: str
    role: str


def pack(
    steps: Sequence[S], groups: Sequence[GroupLike], created_at: datetime, shed: bool = False, run_id: str = ""
) -> tuple[list[list[Any]], list[str], list[S]]:
    """The rows of the steps at rest, the words they name, and the steps that stay maps (in their order).

    Steps out of ``index`` order (or with an index twice) all stay maps: reading sorts by index. A final step's row
    is made once for what it holds (``_PACKED``, "Memos" in the module docstring).
    """
    indexes = [s.index for s in steps]
    if any(a >= b for a, b in pairwise(indexes)):
        return [], [], list(steps)
    places = {g.name: (n, g.role) for n, g in enumerate(groups)}
    words: dict[str, int] = {}
    rows: list[list[Any]] = []
    maps: list[S] = []
    for step in steps:
        made = spelled(step, places, created_at, shed, run_id)
        if made is None:
            maps.append(step)
            continue
        row = list(made)
        for slot in WORD_SLOTS:  # each word's position in the order it was first named
            if slot < len(row) and row[slot] is not None:
                row[slot] = words.setdefault(row[slot], len(words))
        rows.append(row)
    return rows, list(words), maps


def spelled(
    step: StepLike, places: Mapping[str, tuple[int, str]], created_at: datetime, shed: bool, run_id: str
) -> Sequence[Any] | None:
    """The step's row with its words spelled out (a sequence of str, int, bool and None; ``pack`` numbers the words
    in ``WORD_SLOTS``), or None when the step stays a map; made once for what a final step holds (``_PACKED``) when
    not ``shed``. ``places``: group name -> (its position in the run's groups, its role)."""
    place = places.get(step.group)
    if shed or place is None or not step.state.final:
        return _row(step, place, created_at, shed, run_id)
    key = (
        run_id,
        created_at,
        place,
        step.role,
        step.index,
        step.state,
        step.instance_id,
        step.node_name,
        step.needs_update,
        step.surge_instance_id,
        step.drain_status,
        step.note,
        step.command_id,
        step.undo_command_id,
        step.uncordon_command_id,
        step.handed_over_to,
        step.started_at,
        step.finished_at,
        step.spare_ready_at,
        step.settle_first_ok_at,
        tuple(step.entered.items()),
    )
    try:
        return _PACKED[key]
    except KeyError:
        pass
    row = _row(step, place, created_at, shed, run_id)
    if len(_PACKED) >= MEMO_ROWS:
        _PACKED.clear()
    _PACKED[key] = None if row is None else tuple(row)
    return row


def _row(
    step: StepLike, place: tuple[int, str] | None, created_at: datetime, shed: bool, run_id: str
) -> list[Any] | None:
    """The step's row with its words spelled out (``pack`` puts their positions in ``WORD_SLOTS``), or None when
    it stays a map."""
    if place is None or place[1] != step.role:
        return None
    state = step.state
    if not state.final and (state.value != PENDING or not _plan_only(step)):
        return None
    same = step.node_name is not None and step.node_name == step.instance_id
    node: str | bool | None = True if same else step.node_name
    head = [step.index, place[0], step.instance_id, node, step.needs_update]
    if not state.final:
        return head
    if shed:
        return [*head[:3], None, head[4], state.value, step.surge_instance_id]
    times = _times(step, created_at)
    commands = _commands(step, run_id)
    if times is None or commands is None:
        return None
    key, values = times
    return [*head, state.value, step.surge_instance_id, step.drain_status, step.note, key, commands, *values]


def _commands(step: StepLike, run_id: str) -> int | None:
    """The bit set of the step's command ids (``COMMANDS``) plus its hand-over (``HANDOVER_UNIT``), or None when
    an id is not named as the refresher names them or the step handed over to an earlier one (it then stays a
    map)."""
    bits = 0
    if step.handed_over_to is not None:
        if step.handed_over_to <= step.index:
            return None
        bits = HANDOVER_UNIT * (step.handed_over_to - step.index)
    for bit, (field, suffix) in enumerate(COMMANDS):
        value = getattr(step, field)
        if value is None:
            continue
        if value != command_id(run_id, step.index, suffix):
            return None
        bits |= 1 << bit
    return bits


def _plan_only(step: StepLike) -> bool:
    """A pending step that carries nothing but its plan (what a pending row holds)."""
    return (
        not (step.surge_baseline or step.waiting_since or step.entered or step.note)
        and step.surge_instance_id is None
        and step.drain_status is None
        and step.drain_message is None
        and step.command_id is None
        and step.undo_command_id is None
        and step.uncordon_command_id is None
        and step.intent_at is None
        and step.undo_sent_at is None
        and step.started_at is None
        and step.finished_at is None
        and step.spare_ready_at is None
        and step.settle_first_ok_at is None
        and step.handed_over_to is None
    )


def _times(step: StepLike, created_at: datetime) -> tuple[str, list[int]] | None:
    pairs: list[tuple[str, datetime]] = []
    if step.started_at is not None:
        pairs.append(("@started", step.started_at))
    for state, when in step.entered.items():
        if not state or state.startswith("@") or " " in state:
            return None
        pairs.append((state, when))
    pairs += [(key, getattr(step, field)) for key, field in EXTRA_TIMES.items() if getattr(step, field) is not None]
    aware = created_at.tzinfo is not None
    if any((when.tzinfo is not None) != aware for _, when in pairs):
        return None
    pairs.sort(key=lambda pair: pair[1])  # stable: times that coincide keep their order and cost a 0 delta
    values: list[int] = []
    previous = created_at
    for _, when in pairs:
        values.append((when - previous) // _US)
        previous = when
    return " ".join(key for key, _ in pairs), values
