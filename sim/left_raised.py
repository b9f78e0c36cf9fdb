"""A MaxSize a refresh run left raised because the refresher could not run through its whole ``give_back`` window:
what the end check of sizes also accepts (``sim.view.View.restore_excused``, invariant 4).

At a run's end the refresher asks each group's MaxSize back within ``REFRESH_GIVE_BACK_TIMEOUT_SECONDS`` of its first
ask (``GroupSurge.restore_since``, saved before the call); past it the restore is taken as refused for good: MaxSize is
left as read (``max_left``), the run ends ``failed`` naming it and ``CapacityLeftRaised`` is counted (DESIGN.md, "A
give-back Auto Scaling refuses ends the run failed"). An invocation dying at the restore's call cannot be told from one
Auto Scaling refused (both fail the invocation with nothing read back), so a ``crash`` fault killing every invocation of
the refresher from before the first ask to past its deadline (``sim.eventbridge.EventBus.crashes``) leaves it raised by
design, not by a bug (storm seed 240116: a refresher timeout of 29.6 minutes over a restore's 15). Only then is the
recorded ``max_left`` accepted: with the refresher able to act, the simulated Auto Scaling never refusing for good, a
MaxSize left raised is still a failure.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sim.world import World


def crash_excused(world: World, runs: list[dict[str, Any]]) -> dict[str, set[int]]:
    """``World.restore_excused``, plus group -> the ``max_left`` of each ``failed`` run of ``runs`` (``RUN#`` items)
    whose MaxSize restore a refresher ``crash`` window covered from its first ask to its ``give_back`` deadline."""
    out = {name: set(values) for name, values in world.restore_excused.items()}
    limit = world.lambdas.refresher_settings.give_back_timeout_seconds
    windows = [(start, end) for start, end, function, _call, _kind in world.bus.crashes if function == "refresher"]
    for run in runs:
        if run.get("status") != "failed" or not windows:
            continue
        for g in run.get("groups") or []:
            if not isinstance(g, dict) or g.get("max_left") is None or not isinstance(g.get("restore_since"), str):
                continue
            since = (datetime.fromisoformat(g["restore_since"]) - world.kernel.epoch).total_seconds()
            if any(start <= since and since + limit <= end for start, end in windows):
                out.setdefault(str(g.get("name")), set()).add(int(g["max_left"]))
    return out
