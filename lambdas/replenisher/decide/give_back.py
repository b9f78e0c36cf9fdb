"""Rule 8, give back: drain each claimed instance, terminate it with decrement, restore the donors' MaxSize, clear
the compensation. Pure."""

from __future__ import annotations

from core.ledger import DonorState, GiveBackState, Ledger
from lambdas.replenisher.decide.builder import Builder, drain_command, drain_done, send_if_needed
from lambdas.replenisher.decide.recover import giveback_entry
from lambdas.replenisher.plan import Operation, Terminate
from lambdas.replenisher.world import Group


def give_back(b: Builder, group: Group, ledger: Ledger) -> None:
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
            elif drain_done(b, gb.command_id, gb.deadline):
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
                give_back[iid] = giveback_entry(b, iid, name)
                notes.append(f"{b.now.isoformat()} {iid} given back in place of a compensating instance that left")
    comp = comp.model_copy(update={"give_back": give_back, "notes": tuple(notes)})
    b.write(ledger.model_copy(update={"compensation": comp}), "give-back progress recorded")
    for iid, gb in sorted(give_back.items()):
        if gb.state is GiveBackState.DRAINING:
            send_if_needed(b, drain_command(b, iid, gb.command_id, gb.deadline, reason))
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
