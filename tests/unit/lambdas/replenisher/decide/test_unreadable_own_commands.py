"""An own ``CMD#`` item the replenisher cannot read (``own_commands.own_command_error``) is left out of
``World.commands``, its id kept in ``World.unreadable_commands``: it is never a finished drain, and no command is ever
recorded under its id again (the record refuses to overwrite), so a drain sent again takes an id past every recorded
one, readable or not. Before, the surplus cleanup could not count such an item and planned the same refused id each
tick until the item's TTL (days), and a give-back sent a refused id until its ledger deadline. Plain values in, plan
out."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from core.kops import Role
from core.ledger import GiveBackState
from lambdas.replenisher.decide import decide
from lambdas.replenisher.decide.builder import reissued_id
from lambdas.replenisher.plan import SendDrain, Terminate, WriteLedger
from lambdas.replenisher.world import World
from tests.unit.lambdas.replenisher.builders import SETTINGS, T0, group, ids, nodes_for
from tests.unit.lambdas.replenisher.decide.reality_world import TICK, returning

TIMEOUT = timedelta(seconds=SETTINGS.giveback_drain_timeout_seconds)


def _sent(world: World) -> tuple[list[str], list[tuple[str, object]]]:
    plan = decide(TICK, T0, SETTINGS, world)
    terminated = [a.instance_id for a in plan.actions if isinstance(a, Terminate)]
    return terminated, [(a.command.command_id, a.command.deadline) for a in plan.actions if isinstance(a, SendDrain)]


def _masters() -> tuple[World, str]:
    masters = group("m", "az-a", 2, ids("c", 2), role=Role.CONTROL_PLANE, max_size=2, pool="master")
    world = World(groups={"m": masters}, nodes=nodes_for(masters), membership_confirmed=True)
    return world, masters.instances[1].instance_id


def test_an_unreadable_latest_surplus_drain_is_passed_with_a_fresh_id_not_planned_again() -> None:
    """``surplus-<id>`` never ran (ended unstarted), ``surplus-<id>-2`` is recorded but unreadable: the next drain is
    ``surplus-<id>-3``, never ``-2`` again (refused by the record every tick), and the master is not terminated."""
    world, surplus = _masters()
    expired = {
        "status": "timed_out",
        "instance_id": surplus,
        "command": {"command_id": f"surplus-{surplus}", "deadline": (T0 - timedelta(hours=1)).isoformat()},
    }
    world = replace(
        world, commands={f"surplus-{surplus}": expired}, unreadable_commands=frozenset({f"surplus-{surplus}-2"})
    )
    terminated, sent = _sent(world)
    assert terminated == []
    assert sent == [(f"surplus-{surplus}-3", T0 + TIMEOUT)]


def test_an_unreadable_only_surplus_drain_is_never_taken_as_finished() -> None:
    world, surplus = _masters()
    world = replace(world, unreadable_commands=frozenset({f"surplus-{surplus}"}))
    terminated, sent = _sent(world)
    assert terminated == []
    assert sent == [(f"surplus-{surplus}-2", T0 + TIMEOUT)]


def _giving_back(command_id: str, deadline_in: timedelta, unreadable: set[str]) -> tuple[World, str]:
    """b's compensating instance ``draining`` for the give-back under ``command_id``, its ledger deadline
    ``deadline_in`` from now; ``unreadable`` the ids of its own items the read left out."""
    world = returning(3, 0, GiveBackState.DRAINING)
    comp = world.ledgers["a"].compensation
    assert comp is not None
    ((iid, entry),) = comp.give_back.items()
    entry = entry.model_copy(update={"command_id": command_id.format(iid=iid), "deadline": T0 + deadline_in})
    comp = comp.model_copy(update={"give_back": {iid: entry}})
    world = replace(
        world,
        ledgers={"a": world.ledgers["a"].model_copy(update={"compensation": comp})},
        unreadable_commands=frozenset(u.format(iid=iid) for u in unreadable),
    )
    return world, iid


def test_an_unreadable_give_back_drain_is_sent_again_at_once_under_a_new_id() -> None:
    """Within its deadline: its id is taken (the record refuses it), so waiting out the deadline sends nothing."""
    world, iid = _giving_back("giveback-{iid}", timedelta(minutes=4), {"giveback-{iid}"})
    terminated, sent = _sent(world)
    assert terminated == []
    assert sent == [(f"giveback-{iid}-2", T0 + TIMEOUT)]


def test_a_give_back_drain_sent_again_takes_an_id_past_every_recorded_one() -> None:
    """The ledger's ``-2`` and a ``-3`` are both recorded unreadable: ``-4``, in the ledger and sent."""
    world, iid = _giving_back("giveback-{iid}-2", -timedelta(minutes=1), {"giveback-{iid}-2", "giveback-{iid}-3"})
    plan = decide(TICK, T0, SETTINGS, world)
    assert not [a for a in plan.actions if isinstance(a, Terminate)]
    assert [a.command.command_id for a in plan.actions if isinstance(a, SendDrain)] == [f"giveback-{iid}-4"]
    comp = next(a for a in plan.actions if isinstance(a, WriteLedger)).ledger.compensation
    assert comp is not None and comp.give_back[iid].command_id == f"giveback-{iid}-4"


def test_the_reissued_id_is_past_every_recorded_one() -> None:
    iid = "i-0123456789abcdef0"
    recorded = [f"giveback-{iid}-7", f"giveback-{iid}-x", f"giveback-{iid}1-9", "giveback-i-0fffffffffffffff0-12"]
    assert reissued_id(f"giveback-{iid}-2", iid, "giveback-", recorded) == f"giveback-{iid}-8"
    assert reissued_id(f"giveback-{iid}", iid, "giveback-", []) == f"giveback-{iid}-2"
