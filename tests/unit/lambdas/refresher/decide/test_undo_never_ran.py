"""The drain of a spare being given back that ended without having run (its message never sent, then expired
``queued`` by the command sweeper; or started only at its deadline) allows no terminate: nothing ends the spare but
that terminate, so its deadline excuses nothing (as the replenisher's own drains). A new drain is sent under a new id
with a whole ``UNDO_DRAIN_SECONDS``. A drain that ran and timed out is followed by the terminate as before."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from core.model import DEADLINE_PASSED_BEFORE_START, CommandKind
from core.runs import StepState
from lambdas.refresher.decide import advance
from lambdas.refresher.decide.context import UNDO_DRAIN_SECONDS
from lambdas.refresher.decide.undo import reissued_undo_id
from lambdas.refresher.plan import SendCommand, TerminateInstance
from tests.unit.lambdas.refresher.decide_world import OLD, OTHER, SETTINGS, SPARE, T0, effects, run, world

DEADLINE = T0 + timedelta(seconds=UNDO_DRAIN_SECONDS)
EXPIRED = "expired: never started before its deadline"
LATER = DEADLINE + timedelta(seconds=400)


@pytest.mark.parametrize(
    ("started", "reissued", "message"),
    [
        (None, True, EXPIRED),  # expired queued by the sweeper: never started
        (DEADLINE, True, EXPIRED),  # started only at its deadline: timed out at once, nothing evicted
        (T0 + timedelta(seconds=10), False, "drained 3 of 5 pods"),  # ran and timed out: the policy's deadline passed
        (T0 + timedelta(seconds=10), True, DEADLINE_PASSED_BEFORE_START),  # taken up, waited for a slot: never ran
    ],
)
def test_an_undo_drain_that_never_ran_is_sent_again(started, reissued: bool, message: str) -> None:
    r = run(StepState.UNDO_DRAINING, 1, T0, surge_instance_id=SPARE, note="drain timed_out: surge given back")
    cid = f"refresh-{r.run_id}-0-undo"
    r.steps[0].undo_command_id = cid
    item: dict[str, object] = {
        "status": "timed_out",
        "result": {"status": "timed_out", "message": message},
        "command": {"command_id": cid, "deadline": DEADLINE.isoformat()},
    }
    if started is not None:
        item["started_at"] = started.isoformat()
    base = world([OLD, OTHER, SPARE], 3, ready=[OLD, OTHER, SPARE])
    decision = advance(r, replace(base, commands={cid: item}, membership_confirmed=True), SETTINGS, LATER)
    step = decision.run.steps[0]
    if reissued:
        assert not effects(decision, TerminateInstance)
        (send,) = effects(decision, SendCommand)
        assert (send.command.kind, send.command.instance_id, send.command.command_id) == (
            CommandKind.DRAIN,
            SPARE,
            f"{cid}-2",
        )
        assert send.command.deadline == LATER + timedelta(seconds=UNDO_DRAIN_SECONDS)
        assert (step.state, step.undo_command_id) == (StepState.UNDO_DRAINING, f"{cid}-2")
    else:
        (terminate,) = effects(decision, TerminateInstance)
        assert terminate.instance_id == SPARE and step.state is StepState.UNDO_TERMINATING


def test_the_reissued_id_counts_up() -> None:
    assert reissued_undo_id("refresh-r1-3-undo") == "refresh-r1-3-undo-2"
    assert reissued_undo_id("refresh-r1-3-undo-2") == "refresh-r1-3-undo-3"
    assert reissued_undo_id("refresh-r1-3-undo-10") == "refresh-r1-3-undo-11"


def test_a_reissued_id_of_a_form_no_lambda_writes_is_counted_from_none() -> None:
    """``core.model.drain_number`` reads the number, as the replenisher's reissue does: a character ``str.isdigit``
    admits but ``int`` cannot read, or a number longer than any we write, no longer raises in the pass."""
    assert reissued_undo_id("refresh-r1-3-undo-\u00b2") == "refresh-r1-3-undo-\u00b2-2"
    assert reissued_undo_id("refresh-r1-3-undo-" + "9" * 180).endswith("-2")


def test_an_undo_drain_still_queued_past_its_deadline_never_lets_the_spare_be_terminated() -> None:
    """Its message never sent or never received (SQS refusing every send): ``queued`` long past its deadline, the
    case the replenisher closed for its own drains. The refresher's undo never reads it as "no result from the agent
    after the deadline" (``Context.drain_outcome``, which would terminate the spare undrained). Past its deadline it
    can only end unstarted (``drain_never_ran``): before, it was sent again under its id (``Context.unsent``) every
    grace period until the command sweeper expired it, each copy ended unstarted by the agent; now a new drain is sent
    at once under a new id with a whole deadline, as after the sweeper's expiry (above). Before its deadline a
    ``queued`` item is one that may not have reached the queue yet: sent again under its id."""
    from core.model import drain_never_ran

    r = run(StepState.UNDO_DRAINING, 1, T0, surge_instance_id=SPARE, note="drain timed_out: surge given back")
    cid = f"refresh-{r.run_id}-0-undo"
    r.steps[0].undo_command_id = cid
    r.steps[0].entered = {StepState.UNDO_DRAINING.value: T0}
    item: dict[str, object] = {
        "status": "queued",
        "command": {
            "command_id": cid,
            "cluster": "c",
            "kind": "drain",
            "instance_id": SPARE,
            "deadline": DEADLINE.isoformat(),
        },
    }
    base = world([OLD, OTHER, SPARE], 3, ready=[OLD, OTHER, SPARE])
    decision = advance(r, replace(base, commands={cid: item}, membership_confirmed=True), SETTINGS, LATER)
    assert drain_never_ran(item, LATER)
    assert not effects(decision, TerminateInstance)
    (send,) = effects(decision, SendCommand)
    assert (send.command.command_id, send.command.instance_id) == (f"{cid}-2", SPARE)
    assert send.command.deadline == LATER + timedelta(seconds=UNDO_DRAIN_SECONDS)
    assert decision.run.steps[0].state is StepState.UNDO_DRAINING
    assert decision.run.steps[0].undo_command_id == f"{cid}-2"
    # before its deadline (and past the grace period) it is sent again under its own id
    soon = T0 + timedelta(seconds=SETTINGS.effect_grace_seconds + 1)
    early = advance(r, replace(base, commands={cid: item}, membership_confirmed=True), SETTINGS, soon)
    (send,) = effects(early, SendCommand)
    assert send.command.command_id == cid and early.run.steps[0].undo_command_id == cid


def test_an_unreadable_undo_drain_sent_again_has_its_whole_deadline_from_the_resend() -> None:
    """The undo drain sent again under a new id (``-undo-2``) carries ``UNDO_DRAIN_SECONDS`` from the re-send; when
    its item cannot be read, the run's own record of that deadline (``Context.drain_deadline``) counts from the
    re-send too, not from when the step entered ``undo_draining`` (long past: the first drain's whole deadline and
    the sweeper's expiry), which would take it as timed out at once and terminate the spare undrained."""
    r = run(StepState.UNDO_DRAINING, 1, T0, surge_instance_id=SPARE, note="drain timed_out: surge given back")
    cid = f"refresh-{r.run_id}-0-undo"
    r.steps[0].undo_command_id = cid
    r.steps[0].entered = {StepState.UNDO_DRAINING.value: T0}
    expired = {
        "status": "timed_out",
        "result": {"status": "timed_out", "message": EXPIRED},
        "command": {"command_id": cid, "deadline": DEADLINE.isoformat()},
    }
    base = replace(world([OLD, OTHER, SPARE], 3, ready=[OLD, OTHER, SPARE]), membership_confirmed=True)
    resent = advance(r, replace(base, commands={cid: expired}), SETTINGS, LATER).run
    assert resent.steps[0].undo_command_id == f"{cid}-2"
    unreadable = {"status": "mystery", "command": {"command_id": f"{cid}-2", "deadline": "not a time"}}
    commands = {cid: expired, f"{cid}-2": unreadable}
    soon = LATER + timedelta(seconds=UNDO_DRAIN_SECONDS // 2)
    decision = advance(resent, replace(base, commands=commands), SETTINGS, soon)
    assert not effects(decision, TerminateInstance)
    assert decision.run.steps[0].state is StepState.UNDO_DRAINING
    assert any("unreadable" in w.what for w in decision.waits)
    # past the re-sent drain's own deadline and the agent's grace: timed out by the run's policy, as any drain
    late = LATER + timedelta(seconds=UNDO_DRAIN_SECONDS + SETTINGS.agent_grace_seconds + 1)
    (terminate,) = effects(advance(resent, replace(base, commands=commands), SETTINGS, late), TerminateInstance)
    assert terminate.instance_id == SPARE


def test_an_undo_drain_of_a_record_without_its_send_time_counts_from_the_steps_entry() -> None:
    """A ``RUN#`` item written before ``undo_sent_at`` existed reads (its default None), and its unreadable undo drain
    is judged as it was: from when the step entered ``undo_draining``."""
    from core.runs import Run

    r = run(StepState.UNDO_DRAINING, 1, T0, surge_instance_id=SPARE)
    cid = f"refresh-{r.run_id}-0-undo"
    r.steps[0].undo_command_id = cid
    r.steps[0].entered = {StepState.UNDO_DRAINING.value: T0}
    item = r.to_item()
    assert all("undo_sent_at" not in step for step in item["steps"])
    old = Run.model_validate(item)
    assert old.steps[0].undo_sent_at is None
    base = replace(world([OLD, OTHER, SPARE], 3, ready=[OLD, OTHER, SPARE]), membership_confirmed=True)
    commands = {cid: {"status": "mystery"}}
    early = T0 + timedelta(seconds=UNDO_DRAIN_SECONDS)
    assert not effects(advance(old, replace(base, commands=commands), SETTINGS, early), TerminateInstance)
    late = T0 + timedelta(seconds=UNDO_DRAIN_SECONDS + SETTINGS.agent_grace_seconds + 1)
    assert effects(advance(old, replace(base, commands=commands), SETTINGS, late), TerminateInstance)


def test_an_undo_send_time_not_yet_come_holds_the_spare_no_longer_than_a_whole_deadline_from_now() -> None:
    """``undo_sent_at`` later than now (a clock ahead, a hand-edited ``RUN#`` item) is never a deadline decades away
    (the step held, its surge unit never given back): the pass that sees it counts it from now, and saves that, so
    the unreadable drain is timed out a whole ``UNDO_DRAIN_SECONDS`` (and the agent's grace) later, as any."""
    r = run(StepState.UNDO_DRAINING, 1, T0, surge_instance_id=SPARE)
    cid = f"refresh-{r.run_id}-0-undo-2"
    r.steps[0].undo_command_id = cid
    r.steps[0].entered = {StepState.UNDO_DRAINING.value: T0}
    r.steps[0].undo_sent_at = T0 + timedelta(days=36500)
    base = replace(world([OLD, OTHER, SPARE], 3, ready=[OLD, OTHER, SPARE]), membership_confirmed=True)
    commands = {cid: {"status": "mystery"}}
    first = advance(r, replace(base, commands=commands), SETTINGS, LATER)
    assert not effects(first, TerminateInstance)
    assert first.run.steps[0].undo_sent_at == LATER and first.changed
    late = LATER + timedelta(seconds=UNDO_DRAIN_SECONDS + SETTINGS.agent_grace_seconds + 1)
    (terminate,) = effects(advance(first.run, replace(base, commands=commands), SETTINGS, late), TerminateInstance)
    assert terminate.instance_id == SPARE


@pytest.mark.parametrize("deadline", [1764590400, "not a time", None])
def test_an_undo_drain_ended_unstarted_never_lets_the_spare_go_whatever_its_deadline_reads(deadline: object) -> None:
    """``timed_out`` with no ``started_at`` (the sweeper's expiry; the agent writes ``started_at`` as it takes a
    drain up) never ran, whether or not this reader can take its deadline (``Command`` validates an epoch number, so
    the sweeper expires such an item): sent again, the spare kept, as the simulation's checker reads it."""
    r = run(StepState.UNDO_DRAINING, 1, T0, surge_instance_id=SPARE, note="drain timed_out: surge given back")
    cid = f"refresh-{r.run_id}-0-undo"
    r.steps[0].undo_command_id = cid
    item = {
        "status": "timed_out",
        "result": {"status": "timed_out", "message": EXPIRED},
        "command": {"command_id": cid, "deadline": deadline},
    }
    base = world([OLD, OTHER, SPARE], 3, ready=[OLD, OTHER, SPARE])
    decision = advance(r, replace(base, commands={cid: item}, membership_confirmed=True), SETTINGS, LATER)
    assert not effects(decision, TerminateInstance)
    (send,) = effects(decision, SendCommand)
    assert (send.command.command_id, send.command.instance_id) == (f"{cid}-2", SPARE)


def test_an_undo_drain_taken_up_only_at_its_deadline_and_left_running_never_lets_the_spare_go() -> None:
    """The agent took it up at its deadline and stopped before it ended it (``timed_out``, nothing evicted): it
    stays ``running`` for good (the sweeper retakes no drain past its deadline). "No result from the agent after the
    deadline" is no drain that ran: sent again, the spare kept."""
    r = run(StepState.UNDO_DRAINING, 1, T0, surge_instance_id=SPARE, note="drain timed_out: surge given back")
    cid = f"refresh-{r.run_id}-0-undo"
    r.steps[0].undo_command_id = cid
    item = {
        "status": "running",
        "started_at": DEADLINE.isoformat(),
        "command": {"command_id": cid, "deadline": DEADLINE.isoformat()},
    }
    base = world([OLD, OTHER, SPARE], 3, ready=[OLD, OTHER, SPARE])
    decision = advance(r, replace(base, commands={cid: item}, membership_confirmed=True), SETTINGS, LATER)
    assert not effects(decision, TerminateInstance)
    (send,) = effects(decision, SendCommand)
    assert (send.command.command_id, send.command.instance_id) == (f"{cid}-2", SPARE)
