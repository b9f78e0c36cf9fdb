"""The limits the refresher's executor clamps each group's sizes to (``core.capacity.Bounds``), from what Auto
Scaling reported this pass and the settings. Pure.

A group the run surges may reach at most its original MaxSize plus the settings' surge limit
(``RefresherSettings.surge_limit``; ``core.capacity.surge_bounds``); the original MaxSize is the one the ``RUN#``
item recorded, never more than the MaxSize Auto Scaling reports now, so a forged run can lower the limit, not raise
it. Only the run's own groups get bounds: a ``SetCapacity`` for any other group is not applied.
"""

from __future__ import annotations

from core.capacity import Bounds, surge_bounds
from core.runs import Run
from core.settings import RefresherSettings
from lambdas.refresher.world import World


def capacity_bounds(run: Run, world: World, settings: RefresherSettings) -> dict[str, Bounds]:
    """Group name -> ``Bounds`` for every group of ``run`` that Auto Scaling reported in ``world``."""
    out = {}
    for group in run.groups:
        facts = world.groups.get(group.name)
        if facts is None:
            continue
        out[group.name] = surge_bounds(
            group.name, facts.min_size, group.original_max, facts.max_size, settings.surge_limit
        )
    return out
