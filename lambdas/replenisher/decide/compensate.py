"""Rules 4 to 6 and the loop over a worker group's compensation: complete recorded intents, compensate a failing
group's shortfall on healthy siblings, claim the compensating instances. Pure."""

from __future__ import annotations

import math

from core.kops import Role
from core.ledger import Compensation, Donor, DonorState, Ledger
from lambdas.replenisher.decide.builder import Builder
from lambdas.replenisher.decide.give_back import give_back
from lambdas.replenisher.decide.reality import recently_reset
from lambdas.replenisher.decide.recover import check_recovery
from lambdas.replenisher.plan import Operation, Reason
from lambdas.replenisher.world import Group


def reconcile_group(b: Builder, group: Group) -> None:
    ledger = b.ledger(group.name)
    comp = ledger.compensation
    failing = ledger.backoff.in_backoff(b.now) and group.shortfall > 0
    if comp is None and not failing:
        return
    if comp is not None and comp.returning:
        give_back(b, group, ledger)
        return
    if comp is None:
        comp = Compensation(pool=group.info.pool, started_at=b.now)
    comp = complete_intents(b, group, ledger.model_copy(update={"compensation": comp}))
    comp = claim_all(b, group.name, comp)
    if failing:
        comp = compensate(b, group, ledger, comp)
    ledger = b.ledger(group.name)
    if not comp.donors:
        if ledger.compensation is not None and not failing:
            b.write(ledger.model_copy(update={"compensation": None}), "nothing was raised: ledger cleared")
        elif ledger.compensation is not None:
            b.write(ledger.model_copy(update={"compensation": comp}), "shortfall recorded")
        return
    comp = check_recovery(b, group, ledger, comp)
    b.write(
        b.ledger(group.name).model_copy(update={"compensation": comp}),
        progress(group.name, b.ledger(group.name).compensation, comp),
    )
    if comp.returning:
        give_back(b, group, b.ledger(group.name))


def progress(name: str, before: Compensation | None, after: Compensation) -> str:
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


def complete_intents(b: Builder, group: Group, ledger: Ledger) -> Compensation:
    comp = ledger.compensation
    assert comp is not None
    intended = [d for d in comp.donors.values() if d.state is DonorState.INTENDED]
    if not intended:
        return comp
    donors = dict(comp.donors)
    for d in intended:
        raise_donor(b, d, f"recorded intent for {group.name} completed")
        donors[d.asg_name] = d.model_copy(update={"state": DonorState.RAISED})
    comp = comp.model_copy(update={"donors": donors})
    b.write(ledger.model_copy(update={"compensation": comp}), "raise completed")
    return comp


def raise_donor(b: Builder, d: Donor, why: str) -> None:
    if d.asg_name not in b.world.groups:
        b.note(Reason.NOTHING_TO_DO, f"donor {d.asg_name} no longer exists")
        return
    desired = d.desired_target if b.desired[d.asg_name] < d.desired_target else None
    # only the MaxSize the target needs: an intent's max_target may be kOps' MaxSize since (rule 3b, ``_own_max``),
    # which kOps may have lowered again before the intent is completed
    max_size = d.desired_target if desired is not None and b.max_size[d.asg_name] < d.desired_target else None
    b.set_capacity(d.asg_name, desired, max_size, why, Operation.REPLENISH)


def claim_all(b: Builder, ledger_name: str, comp: Compensation) -> Compensation:
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


def healthy_siblings(b: Builder, group: Group) -> list[Group]:
    pool = group.info.pool
    zones = set(group.info.availability_zones)
    out = []
    for name, sib in sorted(b.world.groups.items()):
        if name == group.name or sib.role is not Role.NODE or pool is None or sib.info.pool != pool:
            continue
        if sib.run_busy:
            continue  # a refresh run is changing its capacity: it sets absolute sizes there
        if zones & set(sib.info.availability_zones):
            continue
        sib_ledger = b.ledger(name)
        if sib_ledger.backoff.in_backoff(b.now) or sib.shortfall > 0:
            continue
        if sib_ledger.compensation is not None and sib_ledger.compensation.donors:
            continue  # owed capacity itself
        if recently_reset(b, name):
            continue  # its sizes were reset under a compensation: not fought (rule 3b)
        out.append(sib)
    return out


def own_sizes(b: Builder, ledger_name: str, donor: str) -> tuple[int, int]:
    """``donor``'s own DesiredCapacity and MaxSize, before any compensation raised them: its sizes now when no other
    ledger carries anything on it, else the smallest ``desired_before`` the other ledgers recorded (never more than
    its desired now) and its original MaxSize (``Builder.original_max``).

    A donor raised for two failed groups in turn must not record the first raise as its own size in the second
    ledger: once the first compensation is given back and cleared, the second's ``desired_before``/``max_before``
    would be the give-back's floor and the MaxSize it restores, and the donor would end one raise above where it was
    (``reconcile_donors`` would also read the first give-back as a reset of the donor: docs/DESIGN.md invariant 4).
    """
    others = b.donor_records(donor, exclude=ledger_name)
    if not others:
        return b.desired[donor], b.max_size[donor]
    return min([r.desired_before for r in others] + [b.desired[donor]]), b.original_max(donor)


def headroom(b: Builder, donor: str) -> int:
    cap = math.floor(b.original_max(donor) * b.settings.donor_max_size_factor)
    return max(0, cap - b.desired[donor])


def compensate(b: Builder, group: Group, ledger: Ledger, comp: Compensation) -> Compensation:
    carried = sum(d.raised_by - d.returned for d in comp.donors.values() if d.state is not DonorState.RESTORED)
    delta = group.shortfall - carried
    comp = comp.model_copy(update={"owed": max(group.shortfall, carried)})
    if delta <= 0:
        return comp
    siblings = healthy_siblings(b, group)
    room = {s.name: headroom(b, s.name) for s in siblings}
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
        own_desired, own_max = own_sizes(b, group.name, name)
        donors[name] = Donor(
            asg_name=name,
            state=DonorState.INTENDED,
            raised_by=(prior.raised_by if prior else 0) + k,
            desired_before=prior.desired_before if prior else own_desired,
            # a MaxSize above every raise's is kOps' or a person's since (``Builder.original_max``): the original now
            max_before=max(prior.max_before, b.original_max(name)) if prior else own_max,
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
        raise_donor(b, donors[name], f"compensation for {group.name}")
        donors[name] = donors[name].model_copy(update={"state": DonorState.RAISED})
    comp = comp.model_copy(update={"donors": donors})
    b.write(b.ledger(group.name).model_copy(update={"compensation": comp}), "raised")
    return comp
