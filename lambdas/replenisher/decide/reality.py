"""Rule 3b, reconcile with reality: what the ledgers say the donors carry is recomputed from the donors' actual
sizes before anything is decided on it. Pure.

For each donor group, over the ledgers that have it raised (``Donor.state`` ``raised``) and are not giving back
(the give-back, rule 8, re-reads the donor itself), the capacity it really holds for them is its DesiredCapacity
as Auto Scaling reports it now minus its own size before the raises (the earliest ledger's ``desired_before``, or
its MinSize now when that is higher: a floor raised under the raise, by a ``kops update cluster`` of a spec whose
minSize is the donor's raised size, makes those units the donor's own, and they cover no shortfall; storm seed
300032). When that is less than the ledgers carry (``raised_by - returned`` summed), someone (``kops update
cluster``, a person) reset the donor's sizes:

- what it still holds is shared out to the ledgers in the order they raised it (earliest first); each ledger whose
  share is short gets ``raised_by`` lowered to ``returned`` + its share, its claimed instances cut to match (the
  rest are the donor's own now), ``desired_before`` rebased on the donor's own size now (its desired capacity minus
  what it still holds for the ledgers: every ledger records the donor's own size, never another ledger's raise),
  ``max_before`` lowered to its MaxSize now when that is smaller, and
  ``reset_at`` set (noted in the ledger);
- a ``size_reset`` note is logged and counted (``Skipped{reason=size_reset}`` and ``SizeResets``);
- the failed group's shortfall is then re-evaluated as usual (rule 5) with the lowered carry, on the *other*
  siblings: a donor reset less than ``RESET_HOLD_SECONDS`` ago is not raised again (``recently_reset``), so a reset
  that kOps repeats is not fought in a loop.

A MaxSize reset that leaves the desired capacity held is noted only: the original MaxSize is the smaller of the
recorded and the actual one (``core.capacity.original_max``), so the give-back never raises it back. A MaxSize above
every raise of ours is kOps' (a person's): every ledger's record of the donor, held, giving back or restored, takes it
as ``max_before`` (``_own_max``), so no record keeps an older original for a later raise or give-back to restore.
"""

from __future__ import annotations

from datetime import timedelta

from core.ledger import Donor, DonorState
from lambdas.replenisher.decide.builder import Builder
from lambdas.replenisher.plan import Reason


def recently_reset(b: Builder, donor: str) -> bool:
    """Whether ``donor`` was found reset under a compensation less than ``RESET_HOLD_SECONDS`` ago."""
    hold = timedelta(seconds=b.settings.reset_hold_seconds)
    return any(r.reset_at is not None and b.now - r.reset_at < hold for r in b.donor_records(donor))


def reconcile_donors(b: Builder) -> None:
    """Lower what the ledgers carry to what each donor really holds (module docstring)."""
    for donor in sorted({d for led in b.ledgers.values() if (c := led.compensation) is not None for d in c.donors}):
        _own_max(b, donor)
    records: dict[str, list[tuple[str, Donor]]] = {}
    for name, ledger in sorted(b.ledgers.items()):
        comp = ledger.compensation
        if comp is None or comp.returning:
            continue
        for donor, d in comp.donors.items():
            if d.state is DonorState.RAISED and d.raised_by > d.returned:
                records.setdefault(donor, []).append((name, d))
    for donor, held_for in sorted(records.items()):
        group = b.world.groups.get(donor)
        if group is None:
            continue
        held_for.sort(key=lambda item: (item[1].raised_at, item[0]))
        carried = sum(d.raised_by - d.returned for _, d in held_for)
        base = max(min(d.desired_before for _, d in held_for), group.min_size)  # its own size (module docstring)
        held = max(0, group.desired - base)
        raised_max = max(d.max_target for _, d in held_for)
        if held >= carried:
            if group.max_size < raised_max and raised_max > min(d.max_before for _, d in held_for):
                b.note(Reason.SIZE_RESET, f"{donor}: MaxSize reset to {group.max_size} (raised to {raised_max})")
            continue
        b.note(
            Reason.SIZE_RESET,
            f"{donor} holds {held} of the {carried} it carries for {', '.join(n for n, _ in held_for)} (desired "
            f"{group.desired}, MaxSize {group.max_size}, MinSize {group.min_size}): reset by kOps or a person; "
            "shortfall re-evaluated on other siblings",
        )
        own = group.desired - held  # the donor's own size now
        left = held
        below = own
        for name, d in held_for:
            share = min(d.raised_by - d.returned, left)
            left -= share
            below += share
            if share == d.raised_by - d.returned:
                continue
            alive = [i for i in d.instance_ids if group.has(i)]
            updated = d.model_copy(
                update={
                    "raised_by": d.returned + share,
                    "instance_ids": tuple(alive[:share]),
                    "desired_before": own,
                    "desired_target": below,
                    "max_before": min(d.max_before, group.max_size),
                    "max_target": min(d.max_target, group.max_size),
                    "reset_at": b.now,
                }
            )
            note = (
                f"{donor} was reset (desired {group.desired}, MaxSize {group.max_size}): it holds {share} of the "
                f"{d.raised_by - d.returned} raised for {name}"
            )
            _write_donor(b, name, donor, updated, note, f"{donor} size reset detected")


def _own_max(b: Builder, donor: str) -> None:
    """A MaxSize of ``donor`` above every raise of ours (``max_target`` of every record, those in flight, given back
    or restored too): kOps' (a person's), the donor's own, written as ``max_before`` (the raise holds no MaxSize above
    it) into every ledger's record of it, so a give-back restores it, never the MaxSize before it (resize seed 358113:
    kOps wrote MaxSize 14 over our 12; a later raise to 15 hid it from ``Builder.original_max``, and the give-back left
    the donor at 11, its desired capacity). Every record, not only those holding a raise: ``original_max`` reads each
    one's ``max_before``, and once a record's ``max_target`` reaches the MaxSize it is no longer above every raise, so
    a record left with the old one (a ledger giving back, one restored in a ledger not yet cleared) would be the
    original a later raise records and a give-back restores. Written at once."""
    group = b.world.groups.get(donor)
    records = b.donor_records(donor)
    if group is None or not records:
        return
    above = group.max_size > max(r.max_target for r in records)
    # below every original: kOps lowered it (no write of ours asks a MaxSize under a record's ``max_before``), and a
    # record kept the higher one: a later raise of the donor then hid kOps' from ``original_max``, and the give-back
    # left MaxSize one above kOps' (resize seed 365231)
    below = group.max_size < min(r.max_before for r in records)
    if not above and not below:
        return
    for name in sorted(b.ledgers):
        comp = b.ledger(name).compensation
        d = None if comp is None else comp.donors.get(donor)
        if d is None:
            continue
        if above:
            updated = d.model_copy(update={"max_before": group.max_size, "max_target": group.max_size})
            note = f"{donor}: MaxSize {group.max_size} set by kOps or a person, above our raise: its own"
        else:
            # a record that raised no MaxSize follows it; one that did keeps its target (its raise was reset: noted)
            target = group.max_size if d.max_target <= d.max_before else d.max_target
            updated = d.model_copy(update={"max_before": group.max_size, "max_target": target})
            note = f"{donor}: MaxSize {group.max_size} set by kOps or a person, below its original: its own"
        _write_donor(b, name, donor, updated, note, f"{donor} MaxSize {group.max_size} is its own")


def _write_donor(b: Builder, name: str, donor: str, updated: Donor, note: str, why: str) -> None:
    """Write ledger ``name`` with ``updated`` as its record of ``donor`` and ``note`` (prefixed with the time) added to
    its compensation's notes; ``why`` is the write's description in the plan."""
    ledger = b.ledger(name)
    comp = ledger.compensation
    assert comp is not None
    notes = (*comp.notes, f"{b.now.isoformat()} {note}")
    comp = comp.model_copy(update={"donors": {**comp.donors, donor: updated}, "notes": notes})
    b.write(ledger.model_copy(update={"compensation": comp}), why)
