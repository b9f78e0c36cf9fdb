"""The refresher's hand-over baseline as it was before resize seed 364029 (``lambdas.refresher.decide.handover
.successor_baseline``), for the regression tests that put it back: 364029's, and storm seed 240042's checker case,
whose spares it moved."""

from __future__ import annotations

from core.runs import RunStep
from lambdas.refresher.decide.context import Context
from lambdas.refresher.world import GroupFacts


def whole_group_but_the_old(_p: Context, step: RunStep, _to: RunStep, facts: GroupFacts) -> list[str]:
    """A successor's baseline before the fix: every instance of the group now but ``step``'s old one."""
    return sorted(i.instance_id for i in facts.instances if i.instance_id != step.instance_id)
