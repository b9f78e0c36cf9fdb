"""Foreign or malformed ``CMD#`` ids beside the replenisher's own drains (the agent partition is written by more than
the replenisher): an id of the form ``<prefix><instance id>-<suffix>`` whose suffix is no plain decimal number is no
drain of the replenisher's and never breaks the decision (``str.isdigit`` also answers True for characters ``int``
cannot read, such as superscripts). Plain values in, plan out."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from core.kops import Role
from core.ledger import GiveBackState
from lambdas.replenisher.decide import decide
from lambdas.replenisher.decide.builder import reissued_id
from lambdas.replenisher.decide.cleanup import latest_surplus
from lambdas.replenisher.plan import SendDrain, Terminate
from lambdas.replenisher.world import World
from tests.unit.lambdas.replenisher.builders import SETTINGS, T0, group, ids, nodes_for
from tests.unit.lambdas.replenisher.decide.reality_world import TICK, returning

IID = "i-0123456789abcdef0"
# never written by ``reissued_id``: no number of the instance's (nor one its next id could collide with)
ODD = ["\u00b2", "\u2460", "\u0663", "\uff13", "1\u00b2", "-1", "+1", " 1", "1_0", "0x1", "0", "1", "007", "x"]
ODD += ["9" * 10, "9" * 180]


@pytest.mark.parametrize("suffix", ODD)
def test_an_odd_suffix_is_no_number_of_the_instance(suffix: str) -> None:
    recorded = [f"giveback-{IID}-{suffix}"]
    assert reissued_id(f"giveback-{IID}", IID, "giveback-", recorded) == f"giveback-{IID}-2"
    assert latest_surplus([f"surplus-{IID}-{suffix}"], IID) == f"surplus-{IID}"


def test_the_next_id_is_past_every_id_of_ours_and_fits_a_command() -> None:
    recorded = [f"giveback-{IID}-{n}" for n in ("0", "007", "12", "9" * 180)]
    new = reissued_id(f"giveback-{IID}", IID, "giveback-", recorded)
    assert new == f"giveback-{IID}-13"
    assert latest_surplus([r.replace("giveback-", "surplus-") for r in recorded], IID) == f"surplus-{IID}-12"


@pytest.mark.parametrize("suffix", ["\u00b2", "9" * 180])
def test_an_unreadable_foreign_surplus_id_never_breaks_the_tick(suffix: str) -> None:
    masters = group("m", "az-a", 2, ids("c", 2), role=Role.CONTROL_PLANE, max_size=2, pool="master")
    surplus = masters.instances[1].instance_id
    world = World(
        groups={"m": masters},
        nodes=nodes_for(masters),
        membership_confirmed=True,
        unreadable_commands=frozenset({f"surplus-{surplus}-{suffix}"}),
    )
    plan = decide(TICK, T0, SETTINGS, world)
    assert not [a for a in plan.actions if isinstance(a, Terminate)]
    assert [a.command.command_id for a in plan.actions if isinstance(a, SendDrain)] == [f"surplus-{surplus}"]


@pytest.mark.parametrize("suffix", ["\u00b2", "9" * 180])
def test_an_unreadable_foreign_give_back_id_never_breaks_the_tick(suffix: str) -> None:
    world = returning(3, 0, GiveBackState.DRAINING)
    comp = world.ledgers["a"].compensation
    assert comp is not None
    ((iid, entry),) = comp.give_back.items()
    entry = entry.model_copy(update={"command_id": f"giveback-{iid}", "deadline": T0 + timedelta(minutes=4)})
    comp = comp.model_copy(update={"give_back": {iid: entry}})
    world = replace(
        world,
        ledgers={"a": world.ledgers["a"].model_copy(update={"compensation": comp})},
        unreadable_commands=frozenset({f"giveback-{iid}", f"giveback-{iid}-{suffix}"}),
    )
    plan = decide(TICK, T0, SETTINGS, world)
    assert not [a for a in plan.actions if isinstance(a, Terminate)]
    assert [a.command.command_id for a in plan.actions if isinstance(a, SendDrain)] == [f"giveback-{iid}-2"]
