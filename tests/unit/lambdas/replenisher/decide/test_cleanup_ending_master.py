"""The surplus-master cleanup keeps the serving master, not one that is ``ending``. A master group with two active
instances (Auto Scaling launched a replacement for a master under a Spot warning or a termination lifecycle action)
has one surplus: before, the ranking kept a Ready node whatever its ``ending`` mark (``NodeRecord.serving`` was not
read there), so by instance id it could keep the master going away within two minutes and drain and terminate the
serving one, leaving the group with no etcd member once the ending one is reclaimed. Pure."""

from __future__ import annotations

from core.kops import Role
from lambdas.events.event import Event, EventKind
from lambdas.replenisher.decide import decide
from lambdas.replenisher.plan import SendDrain, Terminate
from lambdas.replenisher.world import World
from tests.unit.lambdas.replenisher.builders import SETTINGS, T0, group, ids, nodes_for


def test_the_surplus_master_cleanup_keeps_the_serving_master_not_the_ending_one() -> None:
    masters = group("m", "az-a", 2, ids("c", 2), role=Role.CONTROL_PLANE, max_size=2, pool="master")
    ending, serving = (i.instance_id for i in masters.instances)
    assert ending < serving  # by id alone the ending one is kept
    nodes = nodes_for(masters)
    nodes[ending] = nodes[ending].model_copy(update={"unschedulable": True, "ending": True})
    tick = Event(kind=EventKind.TICK, event_id="t", event_time=T0, source="aws.events", detail_type="Scheduled Event")
    plan = decide(tick, T0, SETTINGS, World(groups={"m": masters}, nodes=nodes, membership_confirmed=True))
    touched = {x.instance_id for x in plan.actions if isinstance(x, Terminate)}
    touched |= {x.command.instance_id for x in plan.actions if isinstance(x, SendDrain)}
    assert serving not in touched, plan.actions
    assert touched == {ending}
