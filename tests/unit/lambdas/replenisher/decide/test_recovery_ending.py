"""A failed group whose nodes are all Ready is not recovered while one of them is cordoned for a Spot warning
(``NodeRecord.ending``): it is reclaimed within two minutes, so the recovery hold does not start (or restarts) and no
give-back begins on its count (``World.ready_nodes`` counts serving nodes). Pure."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from lambdas.replenisher.decide import decide
from lambdas.replenisher.plan import WriteLedger
from lambdas.replenisher.world import World
from tests.unit.lambdas.replenisher.builders import SETTINGS, T0, A, recovering
from tests.unit.lambdas.replenisher.decide.reality_world import TICK

HEALTHY = T0 + timedelta(minutes=40)
NOW = HEALTHY + timedelta(seconds=SETTINGS.recovery_hold_seconds + 60)  # the hold has passed


def world(ending: bool) -> World:
    base = recovering(HEALTHY)
    nodes = dict(base.nodes)
    doomed = base.groups[A].instances[1].instance_id
    nodes[doomed] = nodes[doomed].model_copy(update={"unschedulable": ending, "ending": ending})
    return replace(base, nodes=nodes)


@pytest.mark.parametrize("ending", [False, True])
def test_a_node_under_a_spot_warning_is_no_recovered_capacity(ending: bool) -> None:
    plan = decide(TICK.model_copy(update={"event_time": NOW}), NOW, SETTINGS, world(ending))
    written = [a.ledger for a in plan.actions if isinstance(a, WriteLedger) and a.ledger.asg_name == A]
    assert written
    comp = written[-1].compensation
    assert comp is not None
    if ending:
        assert comp.healthy_since is None and not comp.returning and not comp.give_back
    else:
        assert comp.healthy_since == HEALTHY and comp.returning and comp.give_back
