"""Rule 8's asks of Auto Scaling and their deadline: a give-back's lowering of a raise that never launched, its
terminates with decrement and its MaxSize restore are recorded before they are asked, counted done only once a later
invocation reads them back, and bounded by ``REPLENISH_GIVE_BACK_TIMEOUT_SECONDS`` (``give_back_timeout_seconds``).
Pure.

Per donor of a ledger (``Donor.asked_since``): the deadline counts from the first ask not read back, and starts over
once every ask reads back done (a give-back making progress is never cut short). Past it (the asks refused for good:
AccessDenied, a validation error once kOps changed the group's MinSize or MaxSize), nothing more is asked of that
donor for the ledger: the instances it was giving back are kept (uncordoned: they were drained), what it still holds
for the ledger and a MaxSize not restored are recorded (``Ledger.left_raised``), noted (``left_raised``, counted
``CapacityLeftRaised``) and the donor is closed out (``restored``); once every donor is, the compensation is cleared
as usual, the record of what is left raised kept on the ledger for ``status`` and the operator.
"""

from __future__ import annotations

from datetime import timedelta

from core.ledger import LEFT_RAISED_KEPT, Donor, DonorState, GiveBack, GiveBackState, Ledger, LeftRaised
from core.model import Command, CommandKind
from lambdas.replenisher.decide.builder import GIVEBACK_PREFIX, Builder, drain_command, send_if_needed
from lambdas.replenisher.plan import Reason

UNCORDON_PREFIX = f"{GIVEBACK_PREFIX}uncordon-"
ASKED = (GiveBackState.TERMINATING, GiveBackState.TERMINATED)


def uncordon_command(b: Builder, instance_id: str, command_id: str, reason: str) -> Command:
    """An ``uncordon`` of the node of ``instance_id`` (the agent resolves it when the membership has none)."""
    command = drain_command(
        b, instance_id, command_id, b.now + timedelta(seconds=b.settings.giveback_drain_timeout_seconds), reason
    )
    return command.model_copy(update={"kind": CommandKind.UNCORDON})


def floor(b: Builder, donor: str, desired_before: int) -> int:
    """The size a give-back never takes ``donor`` below: its MinSize now, and its own size before the raise."""
    group = b.world.groups.get(donor)
    return max(desired_before, group.min_size if group is not None else 0)


def carried(b: Builder, donor: str, r: Donor) -> int:
    """The units record ``r`` of ``donor`` carries that ``donor``'s desired capacity still holds: a lowering its
    ledger asked (``cancel_to``) that the desired capacity reads (in this plan too) is out of them already, though
    only a later read back counts it ``returned``."""
    lowered = r.cancelling if r.cancel_to is not None and b.desired[donor] <= r.cancel_to else 0
    return max(0, r.raised_by - r.returned - lowered)


def others_carry(b: Builder, donor: str, ledger_name: str) -> int:
    """The units ``donor`` carries for ledgers other than ``ledger_name`` (not restored; ``carried``)."""
    return sum(
        carried(b, donor, r) for r in b.donor_records(donor, exclude=ledger_name) if r.state is not DonorState.RESTORED
    )


def held_for(b: Builder, donor: str, ledger_name: str, d: Donor) -> int:
    """The units of ``d`` (``ledger_name``'s record of ``donor``) that ``donor`` still holds: what it holds above its
    floor, less what the ledgers that raised it before this one still carry (theirs first, as
    ``reality.reconcile_donors`` shares a donor someone lowered), at most what ``d`` carries. A lowering another
    ledger asked that ``donor``'s desired capacity reads (in this plan too) is out of what it carries already, though
    only a later read back counts it ``returned``. Of two ledgers believing one unit theirs (the donor lowered under
    both, each unit held by no instance of its own), the earlier gives it back and the later none: each waiting for
    the other held both compensations for good."""
    first = (d.raised_at, ledger_name)
    earlier = 0
    for name, led in b.ledgers.items():
        r = None if name == ledger_name or led.compensation is None else led.compensation.donors.get(donor)
        if r is None or r.state is DonorState.RESTORED or (r.raised_at, name) > first:
            continue
        earlier += carried(b, donor, r)
    return max(0, min(d.raised_by - d.returned, b.desired[donor] - floor(b, donor, d.desired_before) - earlier))


def read_back(
    b: Builder,
    failed: str,
    before: dict[str, GiveBack],
    give_back: dict[str, GiveBack],
    donors: dict[str, Donor],
    notes: list[str],
    left: list[LeftRaised],
) -> None:
    """Read back what the last invocations asked of each donor (``before``: the give-back entries as read), and
    close out a donor whose asks are past their deadline (module docstring). A lowering read back (desired capacity
    at or below ``cancel_to``; one someone else made counts too, as the give-back counts any) adds its units to
    ``returned``; one not read back is decided again from the sizes read. A terminate not read back is an entry
    asked before (``terminating``/``terminated`` as read) whose instance is still in its donor."""
    limit = timedelta(seconds=b.settings.give_back_timeout_seconds)
    for name, d in sorted(donors.items()):
        group = b.world.groups.get(name)
        if d.state is not DonorState.RAISED or group is None:
            continue
        cancel_pending = d.cancel_to is not None and b.desired[name] > d.cancel_to
        returned = d.returned + (d.cancelling if d.cancel_to is not None and not cancel_pending else 0)
        restore_pending = d.max_asked is not None and b.max_size[name] != d.max_asked
        terminates = sorted(
            iid
            for iid, gb in give_back.items()
            if gb.donor == name
            and gb.state is GiveBackState.TERMINATING
            and iid in before
            and before[iid].state in ASKED
            and group.has(iid)
        )
        pending = [
            *([f"the lowering to desired {d.cancel_to}"] if cancel_pending else []),
            *([f"the terminate of {', '.join(terminates)}"] if terminates else []),
            *([f"the MaxSize restore to {d.max_asked}"] if restore_pending else []),
        ]
        d = d.model_copy(
            update={
                "returned": min(d.raised_by, returned),
                "cancel_to": None,
                "cancelling": 0,
                "max_asked": None,
                "asked_since": d.asked_since if pending else None,
            }
        )
        donors[name] = d
        if pending and d.asked_since is not None and b.now - d.asked_since > limit:
            close_out(b, failed, d, give_back, donors, notes, left, f"{' and '.join(pending)} not read back")


def close_out(
    b: Builder,
    failed: str,
    d: Donor,
    give_back: dict[str, GiveBack],
    donors: dict[str, Donor],
    notes: list[str],
    left: list[LeftRaised],
    why: str,
) -> None:
    """``failed``'s give-back on ``d`` past its deadline: nothing more asked of it, what it holds left raised."""
    name = d.asg_name
    limit = b.settings.give_back_timeout_seconds
    held = max(0, b.desired[name] - floor(b, name, d.desired_before) - others_carry(b, name, failed))
    units = max(0, min(d.raised_by - d.returned, held))
    carrying = any(r.state is not DonorState.RESTORED for r in b.donor_records(name, exclude=failed))
    original = b.original_max(name)
    group = b.world.groups.get(name)
    max_left = b.max_size[name] if not carrying and b.max_size[name] > max(original, b.desired[name]) else None
    if carrying:  # the last ledger carrying a raise on it restores the highest MaxSize the raises set
        hand_over_raise(b, name, failed, d.max_target, d.max_before)
    for iid, gb in sorted(give_back.items()):
        if gb.donor != name or gb.state not in (GiveBackState.DRAINING, GiveBackState.TERMINATING):
            continue
        if group is None or not group.has(iid):
            give_back[iid] = gb.model_copy(update={"state": GiveBackState.GONE, "updated_at": b.now})
            continue
        give_back[iid] = gb.model_copy(update={"state": GiveBackState.KEPT, "updated_at": b.now})
        # drained (or being drained) for the give-back: uncordoned, as any node this system cordoned that stays
        send_if_needed(b, uncordon_command(b, iid, f"{UNCORDON_PREFIX}{iid}", f"kept in {name}: give-back overdue"))
    record = LeftRaised(
        at=b.now, donor=name, units=units, desired=b.desired[name], max_size=max_left, max_before=original, why=why
    )
    left.append(record)
    donors[name] = d.model_copy(update={"state": DonorState.RESTORED, "asked_since": None})
    b.note(
        Reason.LEFT_RAISED,
        f"give-back of {name} for {failed} past its deadline ({limit} s): {why}; {record.describe()}",
        units + (1 if max_left is not None else 0),
    )
    notes.append(f"{b.now.isoformat()} {name}: give-back past its deadline ({why}): {record.describe()}")


def hand_over_raise(b: Builder, donor: str, ledger_name: str, max_target: int, max_before: int) -> None:
    """``ledger_name``'s raise of ``donor`` (MaxSize ``max_target``) is given back while other ledgers still carry
    raises on it: the last of them restores the donor's MaxSize, and restores only a MaxSize some raise set (phase
    B). Each carrying record below ``max_target`` takes it, so the highest MaxSize the raises set is known once this
    ledger is cleared. An original MaxSize ``max_before`` this ledger recorded above all a carrying record's raise set
    is one kOps or a person raised since that raise (``Builder.original_max``): that record takes it as its original
    too, so it is never restored below (storm seed 192076)."""
    for other in sorted(b.ledgers):
        ledger = b.ledger(other)
        comp = ledger.compensation
        record = None if other == ledger_name or comp is None else comp.donors.get(donor)
        if comp is None or record is None or record.state is DonorState.RESTORED or record.max_target >= max_target:
            continue
        original = max_before if max_before > record.max_target else record.max_before
        handed = record.model_copy(update={"max_target": max_target, "max_before": original})
        comp = comp.model_copy(update={"donors": {**comp.donors, donor: handed}})
        b.write(
            ledger.model_copy(update={"compensation": comp}), f"{donor}: MaxSize {max_target} of {ledger_name}'s raise"
        )


def with_left(ledger: Ledger, left: list[LeftRaised]) -> Ledger:
    """``ledger`` with the close-outs in ``left`` added to its record (the newest ``LEFT_RAISED_KEPT``)."""
    if not left:
        return ledger
    return ledger.model_copy(update={"left_raised": (*ledger.left_raised, *left)[-LEFT_RAISED_KEPT:]})
