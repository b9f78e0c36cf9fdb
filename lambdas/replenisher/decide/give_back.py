"""Rule 8, give back: drain each claimed instance, terminate it with decrement, restore the donors' MaxSize, clear
the compensation. Every ask of Auto Scaling is recorded before it is made and counted once read back, within a
deadline (``asks``). Pure."""

from __future__ import annotations

from datetime import timedelta

from core.ledger import Donor, DonorState, GiveBack, GiveBackState, Ledger, LeftRaised
from core.model import drain_never_ran
from lambdas.replenisher.decide.asks import (
    UNCORDON_PREFIX,
    floor,
    hand_over_raise,
    held_for,
    others_carry,
    read_back,
    uncordon_command,
    with_left,
)
from lambdas.replenisher.decide.builder import (
    GIVEBACK_PREFIX,
    Builder,
    drain_command,
    drain_done,
    recorded_ids,
    reissued_id,
    send_if_needed,
)
from lambdas.replenisher.decide.recover import giveback_entry
from lambdas.replenisher.plan import Operation, Reason, Terminate
from lambdas.replenisher.world import Group


def _left_while_terminating(
    b: Builder, failed: str, give_back: dict[str, GiveBack], donors: dict[str, Donor], notes: list[str]
) -> None:
    """Judge the instances recorded ``terminating`` that are no longer in their donor by the donor's desired
    capacity, not by the record: the terminate with decrement recorded before the call may never have happened (the
    call refused or the invocation ended first) while the instance left another way (a Spot reclaim, an early
    replacement's detach, someone's terminate), which decrements nothing and leaves Auto Scaling to launch a
    replacement. Per donor, the units it still holds above its floor for ``failed``'s ledger (``desired - floor``,
    less what its other ledgers carry) against those this ledger believes held (``raised_by - returned``) say how
    many decrements happened: that many are ``terminated`` (returned), the others ``gone``, whose units the give-back
    then takes back from what the donor holds (a replacement claimed and given back, or a raise that never launched
    cancelled). A size someone else lowered meanwhile counts as returned, as the rest of the give-back counts it.
    Every other ledger's units are subtracted, not only the earlier raises' (``held_for``): a decrement of this
    ledger's that happened is then always counted, earlier raise or not (shared in raise order, the earlier ledger's
    would read as ``gone`` while a later one carries a unit, and take that unit). Another ledger's lowering the
    desired capacity already reads is out of what it carries (``asks.carried``): counted, it read the unit of an
    instance that left without a decrement as decremented, and the donor stayed raised for good."""
    for name in sorted({gb.donor for gb in give_back.values()}):
        group = b.world.groups.get(name)
        record = donors.get(name)
        if group is None or record is None or record.state is DonorState.RESTORED:
            continue
        left = sorted(
            iid
            for iid, gb in give_back.items()
            if gb.donor == name and gb.state is GiveBackState.TERMINATING and not group.has(iid)
        )
        if not left:
            continue
        believed = record.raised_by - record.returned
        others = others_carry(b, name, failed)
        still_held = max(0, b.desired[name] - floor(b, name, record.desired_before) - others)
        decremented = min(len(left), max(0, believed - still_held))
        for n, iid in enumerate(left):
            gb = give_back[iid]
            if n < decremented:
                give_back[iid] = gb.model_copy(update={"state": GiveBackState.TERMINATED, "updated_at": b.now})
                continue
            give_back[iid] = gb.model_copy(update={"state": GiveBackState.GONE, "updated_at": b.now})
            b.note(
                Reason.UNVERIFIED,
                f"{iid} left {name} while its give-back terminate was pending, and {name}'s desired capacity "
                f"{b.desired[name]} shows no decrement for it: its unit is taken back from what {name} holds",
            )
            notes.append(f"{b.now.isoformat()} {iid} left {name} without the give-back's decrement")
        donors[name] = record.model_copy(update={"returned": record.returned + decremented})


def give_back(b: Builder, group: Group, ledger: Ledger) -> None:
    comp = ledger.compensation
    assert comp is not None and comp.returning
    give_back = dict(comp.give_back)
    donors = dict(comp.donors)
    notes = list(comp.notes)
    left: list[LeftRaised] = []
    reason = f"scale-back: compensation for {group.name} given back"
    # phase A: draining -> terminating / gone; replacements for gone ones
    for iid, gb in sorted(comp.give_back.items()):
        donor_group = b.world.groups.get(gb.donor)
        if gb.state is GiveBackState.TERMINATED and donor_group is not None and donor_group.has(iid):
            give_back[iid] = gb.model_copy(update={"state": GiveBackState.TERMINATING, "updated_at": b.now})
            d = donors[gb.donor]
            donors[gb.donor] = d.model_copy(update={"returned": max(0, d.returned - 1)})
            b.note(Reason.UNVERIFIED, f"{iid} was recorded as given back but is still in {gb.donor}: retried")
            notes.append(f"{b.now.isoformat()} {iid} still in {gb.donor} after its terminate: retried")
        if gb.state is GiveBackState.DRAINING:
            if donor_group is None or not donor_group.has(iid):
                give_back[iid] = gb.model_copy(update={"state": GiveBackState.GONE, "updated_at": b.now})
                notes.append(
                    f"{b.now.isoformat()} {iid} left {gb.donor} before it was given back (interrupted "
                    "or terminated by someone else)"
                )
            elif (
                gb.command_id not in b.world.commands
                and gb.command_id not in b.world.unreadable_commands
                and b.now <= gb.deadline
            ):
                pass  # not recorded yet (an invocation ended first): sent below, with the time its deadline leaves
            elif gb.command_id not in b.world.commands or drain_never_ran(b.world.commands[gb.command_id], b.now):
                # no drain has run by its deadline: never recorded, or recorded and never run (still queued past it,
                # an SQS outage longer than the timeout; ended unstarted); or its item is unreadable (left out by the
                # read: never readable back under that id, never a finished drain, never recorded again). Its
                # deadline allows no terminate (storm seed 54175): a new command, a new id past every one recorded
                # (the old item keeps its status), a whole timeout. No compensation note: an agent that never takes
                # one up would grow the ledger each time
                item = b.world.commands.get(gb.command_id)
                reissued = reissued_id(gb.command_id, iid, GIVEBACK_PREFIX, recorded_ids(b.world))
                give_back[iid] = gb.model_copy(
                    update={
                        "command_id": reissued,
                        "deadline": b.now + timedelta(seconds=b.settings.giveback_drain_timeout_seconds),
                        "updated_at": b.now,
                    }
                )
                status = (
                    f"status {item.get('status')}"
                    if item is not None
                    else "unreadable"
                    if gb.command_id in b.world.unreadable_commands
                    else "not recorded"
                )
                b.note(
                    Reason.UNVERIFIED,
                    f"drain {gb.command_id} of {iid} never ran before its deadline ({status}): sent again as "
                    f"{reissued}",
                )
            elif drain_done(b, gb.command_id, gb.deadline):
                give_back[iid] = gb.model_copy(update={"state": GiveBackState.TERMINATING, "updated_at": b.now})
    read_back(b, group.name, comp.give_back, give_back, donors, notes, left)
    _left_while_terminating(b, group.name, give_back, donors, notes)
    cancels: list[tuple[str, int, str]] = []
    for name, d in donors.items():
        if d.state is DonorState.RESTORED or name not in b.world.groups:
            continue
        in_flight = [
            g
            for g in give_back.values()
            if g.donor == name and g.state in (GiveBackState.DRAINING, GiveBackState.TERMINATING)
        ]
        outstanding = d.raised_by - d.returned
        target = held_for(b, name, group.name, d)  # what it holds above its floor for this ledger
        if target < outstanding and not any(f"{name} was resized" in n for n in notes):
            notes.append(
                f"{b.now.isoformat()} {name} was resized by someone else (desired {b.desired[name]}, "
                f"raised from {d.desired_before} by {d.raised_by}): only {target} more given back"
            )
        need = target - len(in_flight)
        if need > 0:
            candidates = _pick(b, group.name, name, need, give_back, set(d.baseline_ids))
            for iid in candidates:
                give_back[iid] = giveback_entry(b, iid, name)
                notes.append(f"{b.now.isoformat()} {iid} given back in place of a compensating instance that left")
            # a raised unit that never launched (the donor's own AZ failed under the raise) has no instance to
            # drain: lowering the desired capacity to no less than the donor's InService/Pending count cancels it
            # and terminates nothing; waiting for it to launch would hold the compensation as long as that outage
            # recorded before it is asked (``cancel_to``, the deadline's first ask), counted returned only once a
            # later invocation reads it back (``asks.read_back``)
            unlaunched = max(0, b.desired[name] - len(b.world.groups[name].active))
            cancel = min(need - len(candidates), unlaunched)
            if cancel > 0:
                lowered = b.desired[name] - cancel
                cancels.append((name, lowered, f"{cancel} unit(s) raised for {group.name} never launched: cancelled"))
                d = donors[name]
                donors[name] = d.model_copy(
                    update={"cancel_to": lowered, "cancelling": cancel, "asked_since": d.asked_since or b.now}
                )
                notes.append(
                    f"{b.now.isoformat()} {name}: {cancel} raised unit(s) never launched, desired lowered to {lowered}"
                )
            # what is left held with no instance of its own, launched or to launch (``held_by_none``)
            found = len(candidates) + cancel
            for iid in held_by_none(b, group.name, name, need - found, give_back):
                give_back[iid] = giveback_entry(b, iid, name)
                notes.append(f"{b.now.isoformat()} {iid} given back for a raised unit that launched no instance")
    for iid, gb in sorted(give_back.items()):  # the terminates asked below: their donor's deadline counts from now
        donor_group = b.world.groups.get(gb.donor)
        d = donors[gb.donor]
        if gb.state is GiveBackState.TERMINATING and donor_group is not None and donor_group.has(iid):
            donors[gb.donor] = d.model_copy(update={"asked_since": d.asked_since or b.now})
    comp = comp.model_copy(update={"give_back": give_back, "donors": donors, "notes": tuple(notes)})
    b.write(with_left(ledger, left).model_copy(update={"compensation": comp}), "give-back progress recorded")
    for name, lowered, why in cancels:
        b.set_capacity(name, lowered, None, why, Operation.SCALE_BACK)
    for iid, gb in sorted(give_back.items()):
        if gb.state is GiveBackState.DRAINING:
            send_if_needed(b, drain_command(b, iid, gb.command_id, gb.deadline, reason))
            b.operations.add(Operation.SCALE_BACK)
    # terminate what is marked terminating (new, or left by a crash) while it is still in its group, never below the
    # donor's floor (Auto Scaling refuses a decrement at MinSize; below its own size it is not ours to take)
    for iid, gb in sorted(give_back.items()):
        if gb.state is not GiveBackState.TERMINATING:
            continue
        donor_group = b.world.groups.get(gb.donor)
        if (
            donor_group is not None
            and donor_group.has(iid)
            and b.desired[gb.donor] - 1 < floor(b, gb.donor, donors[gb.donor].desired_before)
        ):
            give_back[iid] = gb.model_copy(update={"state": GiveBackState.KEPT, "updated_at": b.now})
            d = donors[gb.donor]
            donors[gb.donor] = d.model_copy(update={"raised_by": max(d.returned, d.raised_by - 1)})
            b.note(
                Reason.SIZE_RESET,
                f"{iid} kept in {gb.donor}: desired {b.desired[gb.donor]} is at its floor (MinSize "
                f"{donor_group.min_size}, own size {donors[gb.donor].desired_before}); not given back",
            )
            notes.append(f"{b.now.isoformat()} {iid} kept in {gb.donor}: its sizes need it (MinSize raised)")
            # it was drained for the give-back: its node is uncordoned, as any node this system cordoned and that
            # survives (invariant 6)
            send_if_needed(b, uncordon_command(b, iid, f"{UNCORDON_PREFIX}{iid}", f"kept in {gb.donor}"))
            continue
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
        if in_flight or d.cancel_to is not None:  # a lowering asked: MaxSize waits for it to read back
            continue
        if name in b.world.groups and held_for(b, name, group.name, d) > 0:
            continue  # a replacement still has to be claimed and given back
        carrying = [r for r in b.donor_records(name, exclude=group.name) if r.state is not DonorState.RESTORED]
        raised_to = max([d.max_target] + [r.max_target for r in b.donor_records(name)])
        if name in b.world.groups and b.max_size[name] > raised_to:
            # above every raise on the donor: kOps (a new spec) or a person set it since, theirs (not fought)
            notes.append(
                f"{b.now.isoformat()} {name}: MaxSize {b.max_size[name]} above every raise ({raised_to}): set by "
                "kOps or a person, not restored"
            )
        elif name in b.world.groups and not carrying:
            original = b.original_max(name)
            restore = max(original, b.desired[name])
            if b.max_size[name] > original and b.max_size[name] != restore:
                # recorded before it is asked; the donor is restored once a later invocation reads it back
                donors[name] = d.model_copy(update={"max_asked": restore, "asked_since": d.asked_since or b.now})
                comp = comp.model_copy(update={"give_back": give_back, "donors": donors, "notes": tuple(notes)})
                b.write(b.ledger(group.name).model_copy(update={"compensation": comp}), f"{name}: MaxSize restore")
                b.set_capacity(
                    name, None, restore, f"MaxSize restored after compensating {group.name}", Operation.SCALE_BACK
                )
                continue
            if restore > original:
                notes.append(
                    f"{b.now.isoformat()} {name}: MaxSize left at {restore}, its desired capacity, "
                    f"above the original {original}"
                )
        elif name in b.world.groups:
            hand_over_raise(b, name, group.name, d.max_target, d.max_before)
        donors[name] = d.model_copy(update={"state": DonorState.RESTORED})
    comp = comp.model_copy(update={"give_back": give_back, "donors": donors, "notes": tuple(notes)})
    if all(d.state is DonorState.RESTORED for d in donors.values()):
        b.write(
            b.ledger(group.name).model_copy(update={"compensation": None}),
            f"compensation of {group.name} given back and cleared" + (f" (notes: {'; '.join(notes)})" if notes else ""),
        )
    else:
        b.write(b.ledger(group.name).model_copy(update={"compensation": comp}), "given back so far")


def held_by_none(b: Builder, ledger_name: str, donor: str, count: int, give_back: dict[str, GiveBack]) -> list[str]:
    """Up to ``count`` instances of ``donor`` that ledger ``ledger_name`` gives back for units it holds with no instance
    of their own, launched or to launch: the raise kept an instance the donor was losing (kOps clamped it down, and
    the raise came before Auto Scaling terminated the instances the clamp asked: resize seed 360727, whose give-back
    waited for a launch that never came). Any instance of the donor stands for such a unit, drained and terminated as
    any given back; none another ledger claims or gives back, none in ``give_back`` already, none a run or a
    detachment protects, and none while a refresh run holds a surge unit or is busy in the donor (its desired
    capacity is not all ours then: the give-back waits), or while an active run could not be read (what it
    protects, surges or is busy in is unknown: it waits, as the cleanup does). Pure."""
    group = b.world.groups.get(donor)
    if count <= 0 or group is None or group.run_busy or group.run_surge or b.world.runs_unreadable:
        return []
    return _pick(b, ledger_name, donor, count, give_back, set())


def _pick(
    b: Builder, ledger_name: str, donor: str, count: int, give_back: dict[str, GiveBack], also_out: set[str]
) -> list[str]:
    """Up to ``count`` active instances of ``donor`` (which must be in the world) that ledger ``ledger_name`` may give
    back, lowest id first: none another ledger claims or this plan terminates (``Builder.claimed_elsewhere``), none in
    ``give_back`` already, none a run or a detachment protects (``world.protected``), none in ``also_out`` (the
    donor's baseline, for a replacement of a compensating instance that left: those were the donor's own). Pure."""
    if count <= 0:
        return []
    spent = b.claimed_elsewhere(ledger_name, donor) | set(give_back) | b.world.protected | also_out
    return sorted(i.instance_id for i in b.world.groups[donor].active if i.instance_id not in spent)[:count]
