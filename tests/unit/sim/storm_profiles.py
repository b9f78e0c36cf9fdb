"""The storm profile as it was before a fault kind was added to it: a seed recorded then draws the schedule it drew
(each new kind's entries are drawn after every other entry, so taking them out gives back the schedule before)."""

from __future__ import annotations

from dataclasses import replace

from sim.schedules import STORM

# before other tools' terminations (``sim.foreign``, 2026-12-07)
STORM_BEFORE_FOREIGN = replace(STORM, foreign_terminates_per_day=0, foreign_after_refresh=0)
# before its node health faults (``sim.health``), and as it was when seed 123033 was found (no kOps spec room or
# edits, every refresh at max_surge 1): the seeds found with them run what they ran then
BEFORE_HEALTH = {"not_ready_per_day": 0, "bootstrap_per_day": 0, "master_refreshes_per_day": 0}
STORM_BEFORE_HEALTH = replace(STORM_BEFORE_FOREIGN, **BEFORE_HEALTH)
STORM_BEFORE_SPECS = replace(STORM_BEFORE_HEALTH, spec_room=0, kops_specs_per_day=0, spec_after_refresh=0, surge_two=0)
