"""The limits the executor clamps each group's sizes to (``core.capacity.Bounds``), from what Auto Scaling reported
this invocation and the settings. Pure.

A donor's limit is ``floor(original MaxSize x DONOR_MAX_SIZE_FACTOR)``, the original MaxSize being the smallest
``max_before`` the ledgers record for it, never more than the MaxSize Auto Scaling reports now
(``core.capacity.donor_limit``): a forged ``COMP#`` item can lower the limit, not raise it.
"""

from __future__ import annotations

from core.capacity import Bounds, donor_limit
from core.settings import ReplenisherSettings
from lambdas.replenisher.world import World


def capacity_bounds(world: World, settings: ReplenisherSettings) -> dict[str, Bounds]:
    """Group name -> ``Bounds`` for every managed group of ``world``."""
    recorded: dict[str, int] = {}
    for ledger in world.ledgers.values():
        comp = ledger.compensation
        for name, donor in (comp.donors if comp is not None else {}).items():
            recorded[name] = min(recorded.get(name, donor.max_before), donor.max_before)
    out = {}
    for name, group in world.groups.items():
        limit = donor_limit(recorded.get(name), group.max_size, settings.donor_max_size_factor)
        out[name] = Bounds(
            asg_name=name,
            min_size=group.min_size,
            max_limit=limit,
            source=f"DONOR_MAX_SIZE_FACTOR {settings.donor_max_size_factor} x MaxSize "
            f"{min(recorded.get(name, group.max_size), group.max_size)}",
        )
    return out
