"""The working state a replenisher plan is built in (``Builder``), the plan itself (``Plan``), and the drain
commands the give-back and the cleanup share. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from itertools import chain

from core.ledger import Donor, Ledger
from core.model import Command, CommandKind, CommandStatus, drain_number
from core.settings import ReplenisherSettings
from lambdas.replenisher.plan import (
    CAPACITY_EFFECTS,
    EFFECTS,
    Action,
    Note,
    Operation,
    Reason,
    SendDrain,
    SetCapacity,
    Terminate,
    WriteLedger,
)
from lambdas.replenisher.world import World, blank_ledger

GIVEBACK_PREFIX = "giveback-"
SURPLUS_PREFIX = "surplus-"
OWN_COMMAND_PREFIXES = (GIVEBACK_PREFIX, SURPLUS_PREFIX)
RESEND_AFTER = timedelta(minutes=2)  # a command still queued this long after it was recorded is sent again
PASSED = (CommandStatus.SUCCEEDED.value, CommandStatus.SKIPPED.value, CommandStatus.TIMED_OUT.value)


@dataclass(frozen=True)
class Plan:
    """The actions to apply in order, and the lock operation they need (None: no capacity change)."""

    actions: tuple[Action, ...]
    operation: Operation | None = None

    @property
    def needs_lock(self) -> bool:
        return self.operation is not None

    @property
    def changes(self) -> bool:
        return any(isinstance(a, EFFECTS) for a in self.actions)

    def describe(self) -> list[str]:
        return [a.describe() for a in self.actions]


@dataclass
class Builder:
    """Working state while a plan is built: ledgers as they will be, their versions, planned group sizes."""

    world: World
    settings: ReplenisherSettings
    now: datetime
    actions: list[Action] = field(default_factory=list)
    ledgers: dict[str, Ledger] = field(default_factory=dict)
    versions: dict[str, int | None] = field(default_factory=dict)
    desired: dict[str, int] = field(default_factory=dict)
    max_size: dict[str, int] = field(default_factory=dict)
    operations: set[Operation] = field(default_factory=set)
    cleanups: int = 0

    def __post_init__(self) -> None:
        for name, ledger in self.world.ledgers.items():
            self.ledgers[name] = ledger
            self.versions[name] = ledger.version
        for name, group in self.world.groups.items():
            self.desired[name] = group.desired
            self.max_size[name] = group.max_size

    def ledger(self, name: str) -> Ledger:
        return self.ledgers.get(name) or blank_ledger(name)

    def write(self, ledger: Ledger, why: str) -> None:
        """Append a ledger write if ``ledger`` differs from the last one written/read (a deep copy is kept, so
        the caller may go on changing its dicts)."""
        ledger = ledger.model_copy(deep=True)
        name = ledger.asg_name
        before = self.ledgers.get(name)
        if before is not None and before.model_dump(exclude={"version", "updated_at"}) == ledger.model_dump(
            exclude={"version", "updated_at"}
        ):
            return
        last = self.actions[-1] if self.actions else None
        if isinstance(last, WriteLedger) and last.ledger.asg_name == name:
            # nothing happened since the last write of this ledger: one write says both
            self.actions[-1] = WriteLedger(
                ledger.model_copy(update={"version": last.ledger.version}), last.expected_version, f"{last.why}; {why}"
            )
            self.ledgers[name] = ledger.model_copy(update={"version": (last.expected_version or 0) + 1})
            return
        expected = self.versions.get(name)
        self.actions.append(WriteLedger(ledger, expected, why))
        self.versions[name] = (expected or 0) + 1
        self.ledgers[name] = ledger.model_copy(update={"version": (expected or 0) + 1})

    def set_capacity(self, name: str, desired: int | None, max_size: int | None, why: str, op: Operation) -> None:
        if desired is not None and desired == self.desired.get(name):
            desired = None
        if max_size is not None and max_size == self.max_size.get(name):
            max_size = None
        if desired is None and max_size is None:
            return
        self.actions.append(SetCapacity(name, desired, max_size, why))
        if desired is not None:
            self.desired[name] = desired
        if max_size is not None:
            self.max_size[name] = max_size
        self.operations.add(op)

    def note(self, reason: Reason, detail: str = "", units: int = 0) -> None:
        self.actions.append(Note(reason, detail, units))

    # -- facts across ledgers ------------------------------------------------------------------------------

    def donor_records(self, donor: str, exclude: str | None = None) -> list[Donor]:
        return [
            c.donors[donor]
            for name, led in self.ledgers.items()
            if name != exclude and (c := led.compensation) is not None and donor in c.donors
        ]

    def original_max(self, donor: str) -> int:
        """``donor``'s MaxSize before any raise of ours: the smallest the records say (``max_before``) and its MaxSize
        now (a kOps reset lowers it); its MaxSize now alone when no record has it raised, or when it is above every
        MaxSize a raise set (``max_target``): kOps (a new spec) or a person raised it since, and it is theirs, never
        restored below (storm seed 192076: MaxSize 6 written over a raise's 5 was taken as a second raise's and
        restored to 5)."""
        records = self.donor_records(donor)
        now = self.max_size.get(donor, 0)
        if not records or now > max(r.max_target for r in records):
            return now
        return min([r.max_before for r in records] + [now])

    def claimed_elsewhere(self, ledger_name: str, donor: str) -> set[str]:
        """The instances of ``donor`` no ledger but ``ledger_name`` may claim: those the other ledgers claim or give
        back, and those this plan terminates already (another ledger's give-back, cleared in the same plan: resize
        seed 360727, where the next ledger claimed the instance just terminated with decrement, and waited for a
        replacement that never came)."""
        claimed = {a.instance_id for a in self.actions if isinstance(a, Terminate) and a.asg_name == donor}
        for name, led in self.ledgers.items():
            if name == ledger_name or led.compensation is None:
                continue
            comp = led.compensation
            if donor in comp.donors:
                claimed.update(comp.donors[donor].instance_ids)
            claimed.update(g.instance_id for g in comp.give_back.values() if g.donor == donor)
        return claimed


def finish(b: Builder) -> Plan:
    if not b.actions:
        b.note(Reason.NOTHING_TO_DO)
    operation = None
    for op in (Operation.REPLENISH, Operation.SCALE_BACK, Operation.SURPLUS_CLEANUP):
        if op in b.operations:
            operation = op
            break
    if operation is None and any(isinstance(a, CAPACITY_EFFECTS) for a in b.actions):
        operation = Operation.SCALE_BACK
    return Plan(tuple(b.actions), operation)


def drain_command(b: Builder, instance_id: str, command_id: str, deadline: datetime, reason: str) -> Command:
    node = b.world.nodes.get(instance_id)
    return Command(
        command_id=command_id,
        cluster=b.settings.cluster_name,
        kind=CommandKind.DRAIN,
        instance_id=instance_id,
        node_name=node.node_name if node else None,
        reason=reason,
        deadline=deadline,
    )


def drain_done(b: Builder, command_id: str, deadline: datetime) -> bool:
    """The drain allows the terminate: recorded, and terminal and passed (succeeded, skipped, timed out), or its
    deadline is over whatever its status (policy: a node is not held forever by a drain that cannot finish). A command
    never recorded is no drain, whatever ``deadline`` says: its caller sends it (``send_if_needed``) with a deadline
    from now."""
    item = b.world.commands.get(command_id)
    if item is None:
        return False
    return item.get("status") in PASSED or b.now > deadline


def send_if_needed(b: Builder, command: Command) -> None:
    item = b.world.commands.get(command.command_id)
    if item is None:
        b.actions.append(SendDrain(command))
    elif item.get("status") == CommandStatus.QUEUED.value:
        created = item.get("created_at")
        if created and b.now - datetime.fromisoformat(str(created)) > RESEND_AFTER:
            b.actions.append(SendDrain(Command.model_validate(item["command"])))


def reissued_id(command_id: str, instance_id: str, prefix: str, recorded: Iterable[str] = ()) -> str:
    """The id of the drain sent again for ``instance_id`` after ``command_id`` never ran: ``<prefix><instance
    id>-<n>``, ``n`` one more than the highest of ``command_id``'s and of every id of that form in ``recorded``
    (``<prefix><instance id>`` itself counts 1: 2 after the first). ``recorded``: the ids recorded, readable or not
    (``recorded_ids``): the record refuses to overwrite an item, so an id already taken, even by an item this reader
    cannot read, would never be recorded again. Pure."""
    base = f"{prefix}{instance_id}"
    return f"{base}-{max(map(partial(_number, base), (command_id, *recorded))) + 1}"


def recorded_ids(world: World) -> Iterator[str]:
    """The ids of the replenisher's own commands recorded: those read (``World.commands``) and those left out as
    unreadable (``World.unreadable_commands``)."""
    return chain(world.commands, world.unreadable_commands)


def _number(base: str, command_id: str) -> int:
    """``n`` of ``<base>-<n>``; 1 for ``base`` itself and for any other id (it adds nothing past ``base``)."""
    n = drain_number(base, command_id)
    return 1 if n is None else n
