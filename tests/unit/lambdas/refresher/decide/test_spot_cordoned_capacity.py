"""A Ready node cordoned for a Spot warning (``NodeRecord.ending``) is no capacity for a refresh: not counted among
the Ready nodes besides those being replaced before a drain (seed 123033: the old instance was terminated on its
count and the reclaim left the group short), and no spare. An operator's cordon (no ``ending``) still counts: a
refresh is not stalled behind it. Pure."""

from __future__ import annotations

from core.runs import StepState
from lambdas.refresher.decide import advance
from lambdas.refresher.decide.context import WaitKind
from lambdas.refresher.plan import SendCommand
from lambdas.refresher.world import World
from tests.unit.lambdas.refresher.decide_world import OLD, OTHER, SETTINGS, SPARE, T0, effects, run, world

SPARE_2 = "i-00000000000000004"


def cordoned(base: World, iid: str, ending: bool) -> World:
    nodes = dict(base.nodes)
    nodes[iid] = nodes[iid].model_copy(update={"unschedulable": True, "ending": ending})
    return World(groups=base.groups, nodes=nodes, membership_confirmed=True)


def test_a_node_under_a_spot_warning_is_not_counted_before_a_drain() -> None:
    doomed = cordoned(world([OLD, OTHER, SPARE], 3), OTHER, ending=True)
    decision = advance(run(StepState.SURGING, 1, T0), doomed, SETTINGS, T0)
    assert not effects(decision, SendCommand)
    assert [w.kind for w in decision.waits] == [WaitKind.NODE_READY]
    assert decision.run.steps[0].state is StepState.SURGING


def test_an_operators_cordon_still_counts() -> None:
    operator = cordoned(world([OLD, OTHER, SPARE], 3), OTHER, ending=False)
    (drain,) = effects(advance(run(StepState.SURGING, 1, T0), operator, SETTINGS, T0), SendCommand)
    assert drain.command.instance_id == OLD


def test_a_spare_under_a_spot_warning_is_passed_over_for_a_serving_one() -> None:
    both = cordoned(world([OLD, OTHER, SPARE, SPARE_2], 4), SPARE, ending=True)
    decision = advance(run(StepState.SURGING, 1, T0), both, SETTINGS, T0)
    (drain,) = effects(decision, SendCommand)
    assert drain.command.instance_id == OLD and decision.run.steps[0].surge_instance_id == SPARE_2
