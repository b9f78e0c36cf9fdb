"""A give-back's drain that was never recorded (every invocation that was to record and send it ended first: a Lambda
timeout between the ledger's write and the command's) does not let its instance be terminated when the deadline the
ledger holds for it passes: that deadline is the drain's, and there was no drain. The command is sent with a new
deadline, counted from now (``decide.give_back``; storm seed 54175, docs/SIMULATION.md "Findings"). Plain values in,
plan out."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from core.ledger import GiveBackState
from core.model import CommandStatus
from lambdas.replenisher.decide import decide
from lambdas.replenisher.plan import SendDrain, Terminate, WriteLedger
from lambdas.replenisher.world import World
from tests.unit.lambdas.replenisher.builders import SETTINGS, T0, ids
from tests.unit.lambdas.replenisher.decide.reality_world import TICK, returning

IID = ids("b", 3)[2]
TIMEOUT = timedelta(seconds=SETTINGS.giveback_drain_timeout_seconds)


def _draining(command_status: str | None) -> World:
    """b's compensating instance ``draining`` for the give-back, the ledger's deadline a minute past; its drain
    command recorded with ``command_status`` (None: never recorded)."""
    world = returning(3, 0, GiveBackState.DRAINING)
    if command_status is None:
        return world
    item = {"command_id": f"giveback-{IID}", "status": command_status, "instance_id": IID}
    return replace(world, commands={f"giveback-{IID}": item})


def test_a_drain_never_recorded_is_sent_with_a_new_deadline_and_nothing_is_terminated() -> None:
    plan = decide(TICK, T0, SETTINGS, _draining(None))
    assert not [a for a in plan.actions if isinstance(a, Terminate)]
    sent = [a.command for a in plan.actions if isinstance(a, SendDrain)]
    assert [(c.command_id, c.instance_id, c.deadline) for c in sent] == [(f"giveback-{IID}", IID, T0 + TIMEOUT)]
    comp = next(a for a in plan.actions if isinstance(a, WriteLedger)).ledger.compensation
    assert comp is not None
    entry = comp.give_back[IID]
    assert entry.state is GiveBackState.DRAINING and entry.deadline == T0 + TIMEOUT


def test_a_recorded_drain_past_its_deadline_still_lets_the_give_back_terminate() -> None:
    plan = decide(TICK, T0, SETTINGS, _draining(CommandStatus.RUNNING.value))
    assert [(a.instance_id, a.decrement) for a in plan.actions if isinstance(a, Terminate)] == [(IID, True)]
    assert not [a for a in plan.actions if isinstance(a, SendDrain)]
