"""Rule 7, recovery: a compensated group healthy for the hold period starts its give-back. Pure."""

from __future__ import annotations

from datetime import timedelta

from core.ledger import Compensation, GiveBack, Ledger
from lambdas.replenisher.decide.builder import GIVEBACK_PREFIX, Builder
from lambdas.replenisher.world import Group


def check_recovery(b: Builder, group: Group, ledger: Ledger, comp: Compensation) -> Compensation:
    ready = b.world.ready_nodes(group)
    healthy = group.shortfall == 0 and ready >= group.own_desired
    if not healthy:
        return comp.model_copy(update={"healthy_since": None}) if comp.healthy_since else comp
    since = comp.healthy_since or b.now
    if not ledger.backoff.in_backoff(b.now) and b.now - since >= timedelta(seconds=b.settings.recovery_hold_seconds):
        give_back = dict(comp.give_back)
        for d in comp.donors.values():
            for iid in d.instance_ids:
                if iid not in give_back:
                    give_back[iid] = giveback_entry(b, iid, d.asg_name)
        return comp.model_copy(update={"healthy_since": since, "returning": True, "give_back": give_back})
    return comp.model_copy(update={"healthy_since": since})


def giveback_entry(b: Builder, instance_id: str, donor: str) -> GiveBack:
    return GiveBack(
        instance_id=instance_id,
        donor=donor,
        command_id=f"{GIVEBACK_PREFIX}{instance_id}",
        deadline=b.now + timedelta(seconds=b.settings.giveback_drain_timeout_seconds),
        updated_at=b.now,
    )
