"""The replenisher's decision: notice + world + clock + settings -> a plan. Pure: no I/O, no clock reads.

Every invocation is a reconcile of the whole cluster (level-triggered): the event only adds what it alone knows
(a launch failure and its time) and says whether the invocation concerns this cluster at all.

Rules, in order:

1. **Scope.** A launch event for a group not tagged ``KubernetesCluster=<cluster>`` (another cluster's, or an
   untagged one; the gathered groups are filtered on the tag) is acknowledged (``not_managed``) and changes
   nothing. An agent event for another cluster, or for a command the replenisher did not send (ids other than
   ``giveback-``/``surplus-``), is acknowledged (``not_ours``).
2. **Failure record.** "EC2 Instance Launch Unsuccessful" updates the group's ``Backoff`` (``record_failure``): a
   failure inside the current window moves the window's start (the group stays untrusted until ``window`` after its
   *latest* failure) without widening it, so Auto Scaling's retries every few seconds do not escalate it; a failure
   after the window ended doubles the window (capped at ``BACKOFF_MAX_SECONDS``); a failure after
   ``BACKOFF_RESET_SECONDS`` without one starts over at ``BACKOFF_INITIAL_SECONDS``. It also ends any "healthy
   since" of the group (flapping restarts the hold). Control-plane groups are recorded but never compensated
   (``control_plane``): a master outside its AZ's etcd member slot can never join. A group of the cluster without a
   kOps role tag is treated the same way (``unknown_role``). This write needs no lock.
3. **Lock.** If another holder's lease is valid, nothing else is done (``lock_held``): the failure is recorded and
   the shortfall, which is re-read from Auto Scaling each time, is acted on at the next invocation.
4. **Complete recorded intents first** (crash recovery): a donor ``intended`` is raised to its recorded absolute
   target (only if its desired capacity is below it), then marked ``raised``.
5. **Compensate.** A worker group is *failing* while it is in backoff (a failure within its window) and its
   shortfall (desired - InService - Pending) is positive. The shortfall minus what its ledger already carries is
   spread over *healthy siblings*: worker groups of the same pool (``core.kops.pool_of``) in other AZs, not in
   backoff, not short themselves, not owed capacity, with headroom (``floor(original MaxSize *
   DONOR_MAX_SIZE_FACTOR)`` minus desired). Units go one at a time to the sibling that carries the least for this
   group so far, then the lowest desired, then by name: the shortfall is spread evenly, not piled on one AZ. The
   intent (``Donor`` with desired/MaxSize before and the absolute targets, and the donor's current instance ids as
   its baseline) is written before UpdateAutoScalingGroup, and marked ``raised`` after. MaxSize is raised only when
   the target desired exceeds it. No sibling: nothing is done (``no_healthy_sibling``); too little headroom: what
   fits is done (``partial_cover``). A shortfall that shrinks is not given back piecemeal: the whole compensation
   is given back when the group has recovered.
6. **Claim.** The compensating instances are the donor's new instance ids (not in its baseline, not claimed by
   another ledger), up to ``raised_by``. A claimed instance that left the donor (a Spot interruption and early
   replacement) is dropped and its replacement claimed instead; the ledger notes it.
7. **Recover.** A compensated group is *healthy* when it has no shortfall and has at least its desired count of
   Ready nodes (fresh ``NODE#`` records). ``healthy_since`` is recorded (a new failure clears it); once
   ``RECOVERY_HOLD_SECONDS`` have passed since, and its backoff has passed too, the give-back starts: each claimed instance gets a
   drain command ``giveback-<instance id>`` (deadline now + ``GIVEBACK_DRAIN_TIMEOUT_SECONDS``), recorded in the
   ledger before it is sent.
8. **Give back.** When an instance's command is terminal (succeeded, skipped, timed out; failed counts once its
   deadline passed), the ledger marks it ``terminating``, TerminateInstanceInAutoScalingGroup with
   ShouldDecrementDesiredCapacity=true follows, then ``terminated``. An instance that left the donor meanwhile is
   ``gone`` and its replacement is drained and given back instead. A donor an operator resized down is given back
   only what its desired count still holds of the raise (noted). When a donor has nothing left to give back, its
   MaxSize is restored (to the original MaxSize, or its desired if that is higher: noted) unless another ledger
   still has it raised, then the donor is ``restored``; when every donor is, the compensation is cleared.
9. **Clean up** (not for instances named by an active ``RUN#`` or a ``DETACH#``, nor in groups an active refresh
   run names; at most ``CLEANUP_LIMIT`` per invocation): a control-plane group with more InService/Pending instances
   than its etcd members (kOps defines one etcd member per ``master-<az>`` group) has the extra ones removed (Ready
   registered ones kept first); one with a node is drained first (``surplus-<instance id>``). Any instance
   InService longer than ``MAX_PROVISION_SECONDS`` (from its EC2 launch time) without a fresh ``NODE#`` record is
   terminated without decrement, so the group replaces it; skipped when no fresh ``NODE#`` record exists at all
   (the agent is not reporting: ``membership_unavailable``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from core.kops import Role
from core.ledger import Backoff, Compensation, Donor, DonorState, GiveBack, GiveBackState, Ledger
from core.model import Command, CommandKind, CommandStatus
from core.settings import ReplenisherSettings
from lambdas.events.event import Event, EventKind
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
from lambdas.replenisher.world import IN_SERVICE, Group, World, run_active

GIVEBACK_PREFIX = "giveback-"
SURPLUS_PREFIX = "surplus-"
OWN_COMMAND_PREFIXES = (GIVEBACK_PREFIX, SURPLUS_PREFIX)
ETCD_MEMBERS_PER_GROUP = 1  # kOps: one etcd member per control-plane instance group (master-<az>)
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


def record_failure(backoff: Backoff, at: datetime, settings: ReplenisherSettings) -> Backoff:
    """The backoff after a launch failure at ``at`` (rule 2 of the module docstring). Pure.

    >>> from datetime import timezone
    >>> s = ReplenisherSettings(cluster_name="c", table_name="t", queue_url="q")
    >>> t0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    >>> b = record_failure(Backoff(), t0, s); b.window_seconds, b.streak
    (300, 1)
    >>> b = record_failure(b, t0 + timedelta(seconds=20), s); b.window_seconds, b.streak  # a retry: same window
    (300, 1)
    >>> b = record_failure(b, t0 + timedelta(minutes=10), s); b.window_seconds, b.streak  # failed again: doubled
    (600, 2)
    >>> record_failure(b, t0 + timedelta(hours=4), s).window_seconds  # after 3 h clean: starts over
    300
    """
    last = backoff.last_failure_at
    if last is not None and at < last:
        return backoff  # an older, late-delivered failure: already covered
    if last is None or (at - last).total_seconds() >= settings.backoff_reset_seconds:
        return Backoff(last_failure_at=at, window_seconds=settings.backoff_initial_seconds, streak=1)
    if backoff.in_backoff(at):
        return backoff.model_copy(update={"last_failure_at": at})
    window = min(max(backoff.window_seconds, settings.backoff_initial_seconds) * 2, settings.backoff_max_seconds)
    return Backoff(last_failure_at=at, window_seconds=window, streak=backoff.streak + 1)


@dataclass
class _Builder:
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
        return self.ledgers.get(name) or Ledger(asg_name=name)

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

    def note(self, reason: Reason, detail: str = "") -> None:
        self.actions.append(Note(reason, detail))

    # -- facts across ledgers ------------------------------------------------------------------------------

    def donor_records(self, donor: str, exclude: str | None = None) -> list[Donor]:
        return [
            c.donors[donor]
            for name, led in self.ledgers.items()
            if name != exclude and (c := led.compensation) is not None and donor in c.donors
        ]

    def original_max(self, donor: str) -> int:
        records = self.donor_records(donor)
        return (
            min([r.max_before for r in records] + [self.max_size.get(donor, 0)])
            if records
            else self.max_size.get(donor, 0)
        )

    def claimed_elsewhere(self, ledger_name: str, donor: str) -> set[str]:
        claimed: set[str] = set()
        for name, led in self.ledgers.items():
            if name == ledger_name or led.compensation is None:
                continue
            comp = led.compensation
            if donor in comp.donors:
                claimed.update(comp.donors[donor].instance_ids)
            claimed.update(g.instance_id for g in comp.give_back.values() if g.donor == donor)
        return claimed


def decide(notice: Event, now: datetime, settings: ReplenisherSettings, world: World, lock_free: bool = True) -> Plan:
    """Decide what to do (the rules are in the module docstring).

    Args:
        notice: the parsed event.
        now: the current time (UTC, aware).
        settings: the Lambda's settings.
        world: what Auto Scaling and the table say.
        lock_free: False when another holder's lease on the cluster lock is valid (rule 3).

    Returns:
        The plan: a non-empty tuple of actions (``Note``\\ s only when nothing is to be done), and the lock
        operation its capacity changes need.
    """
    b = _Builder(world, settings, now)
    if notice.kind in (EventKind.LAUNCH_FAILED, EventKind.LAUNCH_SUCCEEDED):
        if notice.asg_name not in world.groups:
            return Plan(
                (Note(Reason.NOT_MANAGED, f"{notice.asg_name} is not tagged for cluster {settings.cluster_name}"),)
            )
    if notice.kind is EventKind.DRAIN_FINISHED:
        if notice.cluster != settings.cluster_name or not (notice.command_id or "").startswith(OWN_COMMAND_PREFIXES):
            return Plan((Note(Reason.NOT_OURS, f"command {notice.command_id} of cluster {notice.cluster}"),))

    if notice.kind is EventKind.LAUNCH_FAILED:
        _record_failure(b, notice)
    if not lock_free:
        holder = (world.lock or {}).get("holder")
        b.note(
            Reason.LOCK_HELD,
            f"{holder} holds the lock ({(world.lock or {}).get('operation')}): acting at the next invocation",
        )
        return _finish(b)

    for name in sorted(world.groups):
        if world.groups[name].role is Role.NODE:
            _reconcile_group(b, world.groups[name])
    _cleanup(b)
    return _finish(b)


def _finish(b: _Builder) -> Plan:
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


# -- rule 2 ----------------------------------------------------------------------------------------------------


def _record_failure(b: _Builder, notice: Event) -> None:
    assert notice.asg_name is not None
    group = b.world.groups[notice.asg_name]
    ledger = b.ledger(group.name)
    update: dict[str, object] = {"backoff": record_failure(ledger.backoff, notice.event_time, b.settings)}
    if ledger.compensation is not None and ledger.compensation.healthy_since is not None:
        update["compensation"] = ledger.compensation.model_copy(update={"healthy_since": None})
    b.write(
        ledger.model_copy(update=update),
        f"launch failure at {notice.event_time.isoformat()}: {notice.status_message or 'no message'}",
    )
    if group.role is Role.CONTROL_PLANE:
        b.note(Reason.CONTROL_PLANE, f"{group.name} is a control-plane group: never compensated in another AZ")
    elif group.role is not Role.NODE:
        b.note(Reason.UNKNOWN_ROLE, f"{group.name} has no kOps role tag: treated like a control-plane group")


# -- rules 4 to 8 ----------------------------------------------------------------------------------------------


def _reconcile_group(b: _Builder, group: Group) -> None:
    ledger = b.ledger(group.name)
    comp = ledger.compensation
    failing = ledger.backoff.in_backoff(b.now) and group.shortfall > 0
    if comp is None and not failing:
        return
    if comp is not None and comp.returning:
        _give_back(b, group, ledger)
        return
    if comp is None:
        comp = Compensation(pool=group.info.pool, started_at=b.now)
    comp = _complete_intents(b, group, ledger.model_copy(update={"compensation": comp}))
    comp = _claim_all(b, group.name, comp)
    if failing:
        comp = _compensate(b, group, ledger, comp)
    ledger = b.ledger(group.name)
    if not comp.donors:
        if ledger.compensation is not None and not failing:
            b.write(ledger.model_copy(update={"compensation": None}), "nothing was raised: ledger cleared")
        elif ledger.compensation is not None:
            b.write(ledger.model_copy(update={"compensation": comp}), "shortfall recorded")
        return
    comp = _check_recovery(b, group, ledger, comp)
    b.write(
        b.ledger(group.name).model_copy(update={"compensation": comp}),
        _progress(group.name, b.ledger(group.name).compensation, comp),
    )
    if comp.returning:
        _give_back(b, group, b.ledger(group.name))


def _progress(name: str, before: Compensation | None, after: Compensation) -> str:
    """What changed in a compensation, for the ledger write's log line."""
    said = []
    claimed_before = {i for d in (before.donors.values() if before else ()) for i in d.instance_ids}
    claimed = {i for d in after.donors.values() for i in d.instance_ids}
    if claimed - claimed_before:
        said.append(f"claimed {', '.join(sorted(claimed - claimed_before))} as compensating")
    if after.healthy_since and (before is None or before.healthy_since != after.healthy_since):
        said.append(f"{name} healthy since {after.healthy_since.isoformat()}")
    if before is not None and before.healthy_since and not after.healthy_since:
        said.append(f"{name} not healthy: the hold restarts")
    if after.returning and (before is None or not before.returning):
        said.append(f"{name} held its nodes for the hold period: give-back starts")
    return "; ".join(said) or "compensation state"


def _complete_intents(b: _Builder, group: Group, ledger: Ledger) -> Compensation:
    comp = ledger.compensation
    assert comp is not None
    intended = [d for d in comp.donors.values() if d.state is DonorState.INTENDED]
    if not intended:
        return comp
    donors = dict(comp.donors)
    for d in intended:
        _raise(b, d, f"recorded intent for {group.name} completed")
        donors[d.asg_name] = d.model_copy(update={"state": DonorState.RAISED})
    comp = comp.model_copy(update={"donors": donors})
    b.write(ledger.model_copy(update={"compensation": comp}), "raise completed")
    return comp


def _raise(b: _Builder, d: Donor, why: str) -> None:
    if d.asg_name not in b.world.groups:
        b.note(Reason.NOTHING_TO_DO, f"donor {d.asg_name} no longer exists")
        return
    desired = d.desired_target if b.desired[d.asg_name] < d.desired_target else None
    max_size = d.max_target if desired is not None and b.max_size[d.asg_name] < d.desired_target else None
    b.set_capacity(d.asg_name, desired, max_size, why, Operation.REPLENISH)


def _claim_all(b: _Builder, ledger_name: str, comp: Compensation) -> Compensation:
    donors = dict(comp.donors)
    notes = list(comp.notes)
    for name, d in comp.donors.items():
        if d.state is not DonorState.RAISED or name not in b.world.groups:
            continue
        group = b.world.groups[name]
        alive = [i for i in d.instance_ids if group.has(i)]
        for lost in (i for i in d.instance_ids if not group.has(i)):
            notes.append(
                f"{b.now.isoformat()} compensating instance {lost} left {name} (interrupted or "
                "replaced): its replacement is claimed instead"
            )
        need = d.raised_by - d.returned - len(alive)
        taken = b.claimed_elsewhere(ledger_name, name) | set(d.baseline_ids) | set(alive)
        candidates = sorted(i.instance_id for i in group.active if i.instance_id not in taken)
        claimed = tuple(alive + candidates[: max(0, need)])
        if claimed != d.instance_ids:
            donors[name] = d.model_copy(update={"instance_ids": claimed})
    return comp.model_copy(update={"donors": donors, "notes": tuple(notes)})


def _healthy_siblings(b: _Builder, group: Group) -> list[Group]:
    pool = group.info.pool
    zones = set(group.info.availability_zones)
    out = []
    for name, sib in sorted(b.world.groups.items()):
        if name == group.name or sib.role is not Role.NODE or pool is None or sib.info.pool != pool:
            continue
        if zones & set(sib.info.availability_zones):
            continue
        sib_ledger = b.ledger(name)
        if sib_ledger.backoff.in_backoff(b.now) or sib.shortfall > 0:
            continue
        if sib_ledger.compensation is not None and sib_ledger.compensation.donors:
            continue  # owed capacity itself
        out.append(sib)
    return out


def _headroom(b: _Builder, donor: str) -> int:
    cap = math.floor(b.original_max(donor) * b.settings.donor_max_size_factor)
    return max(0, cap - b.desired[donor])


def _compensate(b: _Builder, group: Group, ledger: Ledger, comp: Compensation) -> Compensation:
    carried = sum(d.raised_by - d.returned for d in comp.donors.values() if d.state is not DonorState.RESTORED)
    delta = group.shortfall - carried
    comp = comp.model_copy(update={"owed": max(group.shortfall, carried)})
    if delta <= 0:
        return comp
    siblings = _healthy_siblings(b, group)
    room = {s.name: _headroom(b, s.name) for s in siblings}
    room = {k: v for k, v in room.items() if v > 0}
    if not room:
        b.note(
            Reason.NO_HEALTHY_SIBLING,
            f"{group.name} is short of {delta}: no sibling of pool "
            f"{group.info.pool!r} in another AZ is out of backoff with headroom",
        )
        return comp
    units: dict[str, int] = {}
    for _ in range(delta):
        open_ = [n for n in room if room[n] > units.get(n, 0)]
        if not open_:
            break
        carried_by = {n: (comp.donors[n].raised_by if n in comp.donors else 0) + units.get(n, 0) for n in open_}
        pick = min(open_, key=lambda n: (carried_by[n], b.desired[n] + units.get(n, 0), n))
        units[pick] = units.get(pick, 0) + 1
    covered = sum(units.values())
    if covered < delta:
        b.note(Reason.PARTIAL_COVER, f"{group.name} is short of {delta}: siblings' headroom covers {covered}")
    donors = dict(comp.donors)
    for name, k in sorted(units.items()):
        sib = b.world.groups[name]
        prior = donors.get(name)
        target = b.desired[name] + k
        cur_max = b.max_size[name]
        donors[name] = Donor(
            asg_name=name,
            state=DonorState.INTENDED,
            raised_by=(prior.raised_by if prior else 0) + k,
            desired_before=prior.desired_before if prior else b.desired[name],
            max_before=prior.max_before if prior else cur_max,
            desired_target=target,
            max_target=max(cur_max, target),
            raised_at=prior.raised_at if prior else b.now,
            baseline_ids=prior.baseline_ids if prior else tuple(sorted(i.instance_id for i in sib.instances)),
            instance_ids=prior.instance_ids if prior else (),
            returned=prior.returned if prior else 0,
        )
    comp = comp.model_copy(update={"donors": donors, "healthy_since": None})
    b.write(
        b.ledger(group.name).model_copy(update={"compensation": comp}),
        f"intent: cover {covered} of {group.name}'s shortfall with "
        + ", ".join(f"{n} +{k}" for n, k in sorted(units.items())),
    )
    for name in sorted(units):
        _raise(b, donors[name], f"compensation for {group.name}")
        donors[name] = donors[name].model_copy(update={"state": DonorState.RAISED})
    comp = comp.model_copy(update={"donors": donors})
    b.write(b.ledger(group.name).model_copy(update={"compensation": comp}), "raised")
    return comp


def _check_recovery(b: _Builder, group: Group, ledger: Ledger, comp: Compensation) -> Compensation:
    ready = b.world.ready_nodes(group)
    healthy = group.shortfall == 0 and ready >= group.desired
    if not healthy:
        return comp.model_copy(update={"healthy_since": None}) if comp.healthy_since else comp
    since = comp.healthy_since or b.now
    if not ledger.backoff.in_backoff(b.now) and b.now - since >= timedelta(seconds=b.settings.recovery_hold_seconds):
        give_back = dict(comp.give_back)
        for d in comp.donors.values():
            for iid in d.instance_ids:
                if iid not in give_back:
                    give_back[iid] = _giveback_entry(b, iid, d.asg_name)
        return comp.model_copy(update={"healthy_since": since, "returning": True, "give_back": give_back})
    return comp.model_copy(update={"healthy_since": since})


def _giveback_entry(b: _Builder, instance_id: str, donor: str) -> GiveBack:
    return GiveBack(
        instance_id=instance_id,
        donor=donor,
        command_id=f"{GIVEBACK_PREFIX}{instance_id}",
        deadline=b.now + timedelta(seconds=b.settings.giveback_drain_timeout_seconds),
        updated_at=b.now,
    )


def _drain_command(b: _Builder, instance_id: str, command_id: str, deadline: datetime, reason: str) -> Command:
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


def _drain_done(b: _Builder, command_id: str, deadline: datetime) -> bool:
    """The drain allows the terminate: terminal and passed (succeeded, skipped, timed out), or its deadline is
    over whatever its status (policy: a node is not held forever by a drain that cannot finish)."""
    item = b.world.commands.get(command_id)
    if item is not None and item.get("status") in PASSED:
        return True
    return b.now > deadline


def _send_if_needed(b: _Builder, command: Command) -> None:
    item = b.world.commands.get(command.command_id)
    if item is None:
        b.actions.append(SendDrain(command))
    elif item.get("status") == CommandStatus.QUEUED.value:
        created = item.get("created_at")
        if created and b.now - datetime.fromisoformat(str(created)) > RESEND_AFTER:
            b.actions.append(SendDrain(Command.model_validate(item["command"])))


def _give_back(b: _Builder, group: Group, ledger: Ledger) -> None:
    comp = ledger.compensation
    assert comp is not None and comp.returning
    give_back = dict(comp.give_back)
    donors = dict(comp.donors)
    notes = list(comp.notes)
    reason = f"scale-back: compensation for {group.name} given back"
    # phase A: draining -> terminating / gone; replacements for gone ones
    for iid, gb in sorted(comp.give_back.items()):
        donor_group = b.world.groups.get(gb.donor)
        if gb.state is GiveBackState.DRAINING:
            if donor_group is None or not donor_group.has(iid):
                give_back[iid] = gb.model_copy(update={"state": GiveBackState.GONE, "updated_at": b.now})
                notes.append(
                    f"{b.now.isoformat()} {iid} left {gb.donor} before it was given back (interrupted "
                    "or terminated by someone else)"
                )
            elif _drain_done(b, gb.command_id, gb.deadline):
                give_back[iid] = gb.model_copy(update={"state": GiveBackState.TERMINATING, "updated_at": b.now})
    for name, d in comp.donors.items():
        if d.state is DonorState.RESTORED or name not in b.world.groups:
            continue
        in_flight = [
            g
            for g in give_back.values()
            if g.donor == name and g.state in (GiveBackState.DRAINING, GiveBackState.TERMINATING)
        ]
        outstanding = d.raised_by - d.returned
        still_held = max(0, b.desired[name] - d.desired_before)
        target = min(outstanding, still_held)
        if target < outstanding and not any(f"{name} was resized" in n for n in notes):
            notes.append(
                f"{b.now.isoformat()} {name} was resized by someone else (desired {b.desired[name]}, "
                f"raised from {d.desired_before} by {d.raised_by}): only {target} more given back"
            )
        need = target - len(in_flight)
        if need > 0:
            taken = b.claimed_elsewhere(group.name, name) | set(d.baseline_ids) | set(give_back)
            candidates = sorted(i.instance_id for i in b.world.groups[name].active if i.instance_id not in taken)
            for iid in candidates[:need]:
                give_back[iid] = _giveback_entry(b, iid, name)
                notes.append(f"{b.now.isoformat()} {iid} given back in place of a compensating instance that left")
    comp = comp.model_copy(update={"give_back": give_back, "notes": tuple(notes)})
    b.write(ledger.model_copy(update={"compensation": comp}), "give-back progress recorded")
    for iid, gb in sorted(give_back.items()):
        if gb.state is GiveBackState.DRAINING:
            _send_if_needed(b, _drain_command(b, iid, gb.command_id, gb.deadline, reason))
            b.operations.add(Operation.SCALE_BACK)
    # terminate what is marked terminating (new, or left by a crash) while it is still in its group
    for iid, gb in sorted(give_back.items()):
        if gb.state is not GiveBackState.TERMINATING:
            continue
        donor_group = b.world.groups.get(gb.donor)
        if donor_group is not None and donor_group.has(iid):
            b.actions.append(Terminate(iid, gb.donor, True, f"given back after drain ({gb.command_id})"))
            b.desired[gb.donor] = b.desired[gb.donor] - 1
            b.operations.add(Operation.SCALE_BACK)
        give_back[iid] = gb.model_copy(update={"state": GiveBackState.TERMINATED, "updated_at": b.now})
        d = donors[gb.donor]
        donors[gb.donor] = d.model_copy(update={"returned": d.returned + 1})
    # phase B: donors with nothing left -> MaxSize restored -> restored; all restored -> cleared
    for name, d in sorted(donors.items()):
        if d.state is DonorState.RESTORED:
            continue
        in_flight = [
            g
            for g in give_back.values()
            if g.donor == name and g.state in (GiveBackState.DRAINING, GiveBackState.TERMINATING)
        ]
        if in_flight:
            continue
        outstanding = d.raised_by - d.returned
        if (
            name in b.world.groups
            and outstanding > 0
            and min(outstanding, max(0, b.desired[name] - d.desired_before)) > 0
        ):
            continue  # a replacement still has to be claimed and given back
        if name in b.world.groups and not [
            r for r in b.donor_records(name, exclude=group.name) if r.state is not DonorState.RESTORED
        ]:
            original = b.original_max(name)
            restore = max(original, b.desired[name])
            if b.max_size[name] > original and b.max_size[name] != restore:
                b.set_capacity(
                    name, None, restore, f"MaxSize restored after compensating {group.name}", Operation.SCALE_BACK
                )
            if restore > original:
                notes.append(
                    f"{b.now.isoformat()} {name}: MaxSize left at {restore}, its desired capacity, "
                    f"above the original {original}"
                )
        donors[name] = d.model_copy(update={"state": DonorState.RESTORED})
    comp = comp.model_copy(update={"give_back": give_back, "donors": donors, "notes": tuple(notes)})
    if all(d.state is DonorState.RESTORED for d in donors.values()):
        b.write(
            b.ledger(group.name).model_copy(update={"compensation": None}),
            f"compensation of {group.name} given back and cleared" + (f" (notes: {'; '.join(notes)})" if notes else ""),
        )
    else:
        b.write(b.ledger(group.name).model_copy(update={"compensation": comp}), "given back so far")


# -- rule 9 ----------------------------------------------------------------------------------------------------


def _cleanup(b: _Builder) -> None:
    world = b.world
    limit = b.settings.cleanup_limit
    protected = set(world.protected)
    for led in b.ledgers.values():
        if led.compensation is not None:
            protected.update(g.instance_id for g in led.compensation.give_back.values())
    run_groups = {name for name in world.groups for text in world.active_runs if name in text}
    for name in sorted(world.groups):
        group = world.groups[name]
        if group.role is not Role.CONTROL_PLANE or name in run_groups:
            continue
        active = list(group.active)
        if len(active) <= ETCD_MEMBERS_PER_GROUP:
            continue

        def rank(i: object) -> tuple[int, str]:
            node = world.nodes.get(i.instance_id)  # type: ignore[attr-defined]
            return (0 if node and node.ready else 1 if node else 2, i.instance_id)  # type: ignore[attr-defined]

        surplus = sorted(active, key=rank)[ETCD_MEMBERS_PER_GROUP:]
        for inst in surplus:
            if inst.instance_id in protected:
                b.note(Reason.PROTECTED, f"surplus master {inst.instance_id} belongs to a refresh or replacement")
                continue
            if b.cleanups >= limit:
                b.note(Reason.CLEANUP_LIMIT, f"surplus master {inst.instance_id} left for the next invocation")
                continue
            b.cleanups += 1
            decrement = b.desired[name] > ETCD_MEMBERS_PER_GROUP
            why = f"surplus master: {name} defines {ETCD_MEMBERS_PER_GROUP} etcd member"
            if inst.instance_id in world.nodes:
                command_id = f"{SURPLUS_PREFIX}{inst.instance_id}"
                item = world.commands.get(command_id)
                deadline = (
                    datetime.fromisoformat(str(item["command"]["deadline"]))
                    if item
                    else b.now + timedelta(seconds=b.settings.giveback_drain_timeout_seconds)
                )
                if not _drain_done(b, command_id, deadline):
                    _send_if_needed(b, _drain_command(b, inst.instance_id, command_id, deadline, why))
                    b.operations.add(Operation.SURPLUS_CLEANUP)
                    continue
            b.actions.append(Terminate(inst.instance_id, name, decrement, why))
            if decrement:
                b.desired[name] -= 1
            b.operations.add(Operation.SURPLUS_CLEANUP)
            protected.add(inst.instance_id)

    if not world.nodes:
        if any(i.lifecycle_state == IN_SERVICE for g in world.groups.values() for i in g.instances):
            b.note(Reason.MEMBERSHIP_UNAVAILABLE, "no fresh NODE# record: unregistered instances are not judged")
        return
    horizon = timedelta(seconds=b.settings.max_provision_seconds)
    for name in sorted(world.groups):
        if name in run_groups:
            continue
        for inst in world.groups[name].instances:
            if inst.lifecycle_state != IN_SERVICE or inst.instance_id in world.nodes or inst.launch_time is None:
                continue
            if b.now - inst.launch_time <= horizon or inst.instance_id in protected:
                continue
            if b.cleanups >= limit:
                b.note(Reason.CLEANUP_LIMIT, f"unregistered {inst.instance_id} left for the next invocation")
                continue
            b.cleanups += 1
            age = int((b.now - inst.launch_time).total_seconds())
            b.actions.append(
                Terminate(
                    inst.instance_id, name, False, f"InService {age} s without a registered node: the group replaces it"
                )
            )
            b.operations.add(Operation.SURPLUS_CLEANUP)


def runs_text(items: Iterable[dict]) -> tuple[str, ...]:
    """The active ``RUN#`` items as JSON text (how the cleanup finds the groups a run names)."""
    return tuple(json.dumps(item, default=str, sort_keys=True) for item in items if run_active(item))
