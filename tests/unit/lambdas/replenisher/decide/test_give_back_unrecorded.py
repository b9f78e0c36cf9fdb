"""A give-back's drain that was never recorded (every invocation that was to record and send it ended first: a Lambda
timeout between the ledger's write and the command's) does not let its instance be terminated when the deadline the
ledger holds for it passes: that deadline is the drain's, and there was no drain. A new command is sent under a new
id with a deadline counted from now (``decide.give_back``; storm seed 54175, docs/SIMULATION.md "Findings"). Plain
values in, plan out."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from core.ledger import GiveBackState
from core.model import DEADLINE_PASSED_BEFORE_START, CommandStatus
from lambdas.replenisher.decide import decide
from lambdas.replenisher.decide.builder import reissued_id
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


def test_a_drain_never_recorded_by_its_deadline_is_sent_under_a_new_id_and_nothing_is_terminated() -> None:
    """Never recorded, or its item unreadable (the read leaves it out: never readable back under that id)."""
    plan = decide(TICK, T0, SETTINGS, _draining(None))
    assert not [a for a in plan.actions if isinstance(a, Terminate)]
    sent = [a.command for a in plan.actions if isinstance(a, SendDrain)]
    assert [(c.command_id, c.instance_id, c.deadline) for c in sent] == [(f"giveback-{IID}-2", IID, T0 + TIMEOUT)]
    comp = next(a for a in plan.actions if isinstance(a, WriteLedger)).ledger.compensation
    assert comp is not None
    entry = comp.give_back[IID]
    assert entry.state is GiveBackState.DRAINING and entry.deadline == T0 + TIMEOUT
    assert entry.command_id == f"giveback-{IID}-2"


def test_a_drain_not_recorded_yet_within_its_deadline_is_sent_with_the_time_left() -> None:
    world = _draining(None)
    comp = world.ledgers["a"].compensation
    assert comp is not None
    entry = comp.give_back[IID].model_copy(update={"deadline": T0 + timedelta(minutes=4)})
    comp = comp.model_copy(update={"give_back": {IID: entry}})
    world = replace(world, ledgers={"a": world.ledgers["a"].model_copy(update={"compensation": comp})})
    plan = decide(TICK, T0, SETTINGS, world)
    assert not [a for a in plan.actions if isinstance(a, Terminate)]
    sent = [a.command for a in plan.actions if isinstance(a, SendDrain)]
    assert [(c.command_id, c.deadline) for c in sent] == [(f"giveback-{IID}", T0 + timedelta(minutes=4))]


def test_a_recorded_drain_past_its_deadline_still_lets_the_give_back_terminate() -> None:
    plan = decide(TICK, T0, SETTINGS, _draining(CommandStatus.RUNNING.value))
    assert [(a.instance_id, a.decrement) for a in plan.actions if isinstance(a, Terminate)] == [(IID, True)]
    assert not [a for a in plan.actions if isinstance(a, SendDrain)]


def _recorded(status: str, started_at: str | None = None, message: str | None = None) -> World:
    """b's compensating instance ``draining``; its drain recorded (deadline the ledger's, a minute past) with
    ``status`` and ``started_at``, never taken up when that is None, and the agent's result ``message``."""
    world = returning(3, 0, GiveBackState.DRAINING)
    deadline = world.ledgers["a"].compensation.give_back[IID].deadline  # type: ignore[union-attr]
    item = {
        "command_id": f"giveback-{IID}",
        "status": status,
        "instance_id": IID,
        "command": {"command_id": f"giveback-{IID}", "deadline": deadline.isoformat()},
        **({"started_at": started_at} if started_at else {}),
        **({"result": {"status": status, "message": message}} if message is not None else {}),
    }
    return replace(world, commands={f"giveback-{IID}": item})


@pytest.mark.parametrize(
    ("status", "started"),
    [
        (CommandStatus.QUEUED.value, None),  # its message never sent (SQS refusing every send) or never received
        (CommandStatus.TIMED_OUT.value, None),  # the sweeper ended it unstarted ("expired: never started ...")
        (CommandStatus.TIMED_OUT.value, T0.isoformat()),  # the agent took it up only after its deadline
        # taken up after its deadline, the agent stopped before it ended it: running for good, nothing evicted
        (CommandStatus.RUNNING.value, T0.isoformat()),
        # never taken up (no started_at), past its deadline, under a status no writer of ours leaves it in
        (CommandStatus.RUNNING.value, None),
        ("mystery", None),
    ],
)
def test_a_recorded_drain_that_never_ran_before_its_deadline_is_sent_again_under_a_new_id(
    status: str, started: str | None
) -> None:
    plan = decide(TICK, T0, SETTINGS, _recorded(status, started))
    assert not [a for a in plan.actions if isinstance(a, Terminate)]
    sent = [a.command for a in plan.actions if isinstance(a, SendDrain)]
    assert [(c.command_id, c.deadline) for c in sent] == [(f"giveback-{IID}-2", T0 + TIMEOUT)]
    comp = next(a for a in plan.actions if isinstance(a, WriteLedger)).ledger.compensation
    assert comp is not None
    entry = comp.give_back[IID]
    assert (entry.state, entry.command_id, entry.deadline) == (
        GiveBackState.DRAINING,
        f"giveback-{IID}-2",
        T0 + TIMEOUT,
    )


def test_a_drain_ended_before_it_ran_is_sent_again_though_it_started_in_time() -> None:
    """Started (taken up) well before its deadline, then the deadline passed while it waited for a drain slot: the
    agent ended it without evicting anything (``core.model.DEADLINE_PASSED_BEFORE_START``)."""
    started = (T0 - TIMEOUT).isoformat()
    world = _recorded(CommandStatus.TIMED_OUT.value, started, DEADLINE_PASSED_BEFORE_START)
    plan = decide(TICK, T0, SETTINGS, world)
    assert not [a for a in plan.actions if isinstance(a, Terminate)]
    assert [a.command.command_id for a in plan.actions if isinstance(a, SendDrain)] == [f"giveback-{IID}-2"]


def test_a_drain_that_ran_and_timed_out_still_lets_the_give_back_terminate() -> None:
    started = (T0 - TIMEOUT).isoformat()
    plan = decide(TICK, T0, SETTINGS, _recorded(CommandStatus.TIMED_OUT.value, started))
    assert [(a.instance_id, a.decrement) for a in plan.actions if isinstance(a, Terminate)] == [(IID, True)]
    assert not [a for a in plan.actions if isinstance(a, SendDrain)]


def test_a_drain_running_since_before_its_deadline_lets_the_give_back_terminate_past_it() -> None:
    """Taken up in time: it ran; its deadline passing allows the terminate (policy), as before."""
    started = (T0 - TIMEOUT).isoformat()
    plan = decide(TICK, T0, SETTINGS, _recorded(CommandStatus.RUNNING.value, started))
    assert [(a.instance_id, a.decrement) for a in plan.actions if isinstance(a, Terminate)] == [(IID, True)]


def test_the_reissued_ids_count_up() -> None:
    assert reissued_id(f"giveback-{IID}", IID, "giveback-") == f"giveback-{IID}-2"
    assert reissued_id(f"giveback-{IID}-2", IID, "giveback-") == f"giveback-{IID}-3"
