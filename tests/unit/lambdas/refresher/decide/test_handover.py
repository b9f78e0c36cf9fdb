"""A drained worker step hands its surge unit to the next pending step of its group (``decide.handover``): its old
instance is terminated without decrement, Auto Scaling's replacement is the successor's spare, and no raise is
asked for. Driven against the small Auto Scaling model of ``test_lifecycle``; after every pass each group's
``raised`` must equal the units its steps hold (``Run.units_held``), and every run must end with the sizes it found
(invariant 4). Pure."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from core.runs import RunStatus, StepState, WaitDeadline
from lambdas.refresher.passes import outcome_by_event
from lambdas.refresher.plan import SetCapacity, TerminateInstance
from tests.unit.lambdas.refresher.decide.handover_driver import OLD4, OLDS, Driver, Slow, handed
from tests.unit.lambdas.refresher.decide.lifecycle_model import (
    M1,
    NODES,
    OLD1,
    OLD2,
    OLD3,
    T0,
    Model,
    iid,
    new_run,
)


def test_each_drained_step_but_the_canary_and_the_last_hands_its_unit_to_the_next() -> None:
    model = Model(list(OLDS), desired=4, max_size=5)
    driver = Driver(model, new_run(model, OLDS))
    driver.finish()
    run = driver.run
    assert run.status is RunStatus.SUCCEEDED
    assert [s.handed_over_to for s in run.steps] == [None, 2, 3, None]  # the canary alone; the last has no successor
    assert [s.state for s in run.steps] == [StepState.DONE] * 4
    # two raises (the canary's, the first step after it), two terminations with decrement; two without
    assert driver.raises() == 2
    assert driver.terminations() == [
        (OLD1, True),
        (OLD2, False),
        (OLD3, False),
        (OLD4, True),
    ]
    assert (model.desired, model.max_size, len(model.instances)) == (4, 5, 4)
    assert not set(OLDS) & set(model.instances) and run.groups[0].raised == 0


def test_the_hand_over_pass_terminates_without_decrement_and_starts_the_successor_without_a_raise() -> None:
    model = Model(list(OLDS), desired=4, max_size=5)
    driver = Driver(model, new_run(model, OLDS))
    driver.until(handed)
    decision = next(d for d in driver.decisions if any(s.handed_over_to is not None for s in d.run.steps))
    giver, to = decision.run.steps[1], decision.run.steps[2]
    assert [(a.instance_id, a.decrement) for a in decision.actions if isinstance(a, TerminateInstance)] == [
        (OLD2, False)
    ]
    assert not any(isinstance(a, SetCapacity) for a in decision.actions)  # the unit moves, none is added
    assert giver.state is StepState.TERMINATING and giver.handed_over_to == 2
    assert to.state is StepState.SURGING and to.started_at == to.intent_at == decision.run.updated_at
    assert OLD2 not in to.surge_baseline and OLD3 in to.surge_baseline  # the replacement will be new to it
    assert decision.run.groups[0].raised == 1 and decision.run.units_held(NODES) == 1
    # the replacement Auto Scaling launches for OLD2 is the successor's spare, drained for no second raise
    driver.invocation()
    driver.invocation()
    assert driver.run.steps[1].state is StepState.DONE and driver.run.groups[0].raised == 1
    assert driver.run.steps[2].surge_instance_id == iid(0x103) and driver.raises() == 2  # the 3rd launch


def test_the_canary_never_hands_over() -> None:
    model = Model(list(OLDS), desired=4, max_size=8)
    driver = Driver(model, new_run(model, OLDS, max_surge=3))
    driver.until(lambda d: d.run.canary_passed)
    assert driver.run.steps[0].handed_over_to is None and driver.terminations() == [(OLD1, True)]


def test_max_surge_steps_hand_over_each_to_its_own_successor_within_the_limit() -> None:
    olds = [*OLDS, iid(6), iid(7)]
    model = Model(list(olds), desired=6, max_size=6)
    driver = Driver(model, new_run(model, olds, max_surge=2))
    most = 0
    while driver.run.status.active and driver.now < T0 + timedelta(hours=6):
        driver.invocation()
        most = max(most, driver.run.units_held(NODES))
    assert driver.run.status is RunStatus.SUCCEEDED and most == 2
    assert sum(1 for s in driver.run.steps if s.handed_over_to is not None) >= 2
    successors = [s.handed_over_to for s in driver.run.steps if s.handed_over_to is not None]
    assert len(successors) == len(set(successors))  # no unit handed to a step twice
    assert (model.desired, model.max_size, len(model.instances)) == (6, 6, 6)


def test_a_refused_termination_is_retried_without_decrement() -> None:
    model = Slow(list(OLDS), desired=4, max_size=5, refused_handovers=2)  # the hand-over's and its first retry
    driver = Driver(model, new_run(model, OLDS))
    driver.finish()
    again = [decrement for iid, decrement in driver.terminations() if iid == OLD2]
    assert again == [False, False, False]  # the same choice every time, never a decrement
    assert driver.run.status is RunStatus.SUCCEEDED and driver.run.steps[1].state is StepState.DONE
    assert (model.desired, len(model.instances)) == (4, 4) and driver.raises() == 2


def test_a_run_cancelled_after_a_hand_over_gives_the_handed_unit_back_once() -> None:
    model = Model(list(OLDS), desired=4, max_size=5)
    driver = Driver(model, new_run(model, OLDS))
    driver.until(handed)
    driver.run = driver.run.model_copy(update={"cancel_requested": True})
    driver.finish()
    run = driver.run
    assert run.status is RunStatus.CANCELLED
    assert [s.state for s in run.steps] == [StepState.DONE, StepState.DONE, StepState.UNDONE, StepState.SKIPPED]
    assert (model.desired, model.max_size, len(model.instances)) == (4, 5, 4) and run.groups[0].raised == 0
    assert OLD3 in model.instances and OLD4 in model.instances


def test_a_successor_whose_instance_leaves_before_its_spare_gives_the_unit_back() -> None:
    model = Model(list(OLDS), desired=4, max_size=5)
    driver = Driver(model, new_run(model, OLDS))
    driver.until(handed)
    model.instances.remove(OLD3)  # Spot reclaimed the successor's old instance: desired kept, Auto Scaling replaces
    driver.finish()
    run = driver.run
    assert run.status is RunStatus.SUCCEEDED
    assert run.steps[2].state is StepState.UNDONE and run.steps[3].state is StepState.DONE
    assert (model.desired, model.max_size, len(model.instances)) == (4, 5, 4) and run.groups[0].raised == 0


def test_a_successor_whose_instance_is_gone_is_passed_over() -> None:
    model = Model(list(OLDS), desired=4, max_size=5)
    driver = Driver(model, new_run(model, OLDS))
    driver.until(lambda d: d.run.steps[1].state is StepState.SURGING)
    model.instances.remove(OLD3)  # reclaimed while pending: Auto Scaling replaces it
    driver.finish()
    run = driver.run
    assert run.steps[1].handed_over_to == 3 and run.steps[2].state is StepState.SKIPPED
    assert (model.desired, len(model.instances)) == (4, 4) and run.status is RunStatus.SUCCEEDED


def test_an_old_instance_reclaimed_during_its_drain_does_not_hand_over() -> None:
    model = Slow(list(OLDS), desired=4, max_size=5)
    driver = Driver(model, new_run(model, OLDS))
    driver.until(lambda d: d.run.canary_passed)
    model.drains_run = True
    driver.until(lambda d: d.run.steps[1].state is StepState.DRAINING)
    model.instances.remove(OLD2)  # gone under its drain without the run's decrement: today's left_group path
    model.drains_run = False
    driver.finish()
    assert driver.run.steps[1].handed_over_to is None and driver.run.steps[1].state is StepState.DONE
    assert (OLD2, False) not in driver.terminations()
    assert driver.run.status is RunStatus.SUCCEEDED
    assert (model.desired, len(model.instances)) == (4, 4) and driver.run.groups[0].raised == 0


def test_masters_never_hand_over() -> None:
    model = Model([OLD1, OLD2, OLD3], desired=3, max_size=4, masters=[M1])
    driver = Driver(model, new_run(model, [OLD1, OLD2, OLD3], masters=(M1,)))
    driver.finish()
    run = driver.run
    assert run.status is RunStatus.SUCCEEDED and run.steps[0].handed_over_to is None
    # the master's done step is the run's canary: the first worker hands over already
    assert [s.handed_over_to for s in run.steps[1:]] == [2, 3, None]
    assert driver.raises() == 1 and (model.desired, len(model.instances)) == (3, 3)


def test_a_hand_over_pass_ends_the_invocation_and_the_spares_node_ready_reads_it_back() -> None:
    # the successor's spare is Auto Scaling's replacement: its launch and its "Node Ready" are events (a launch
    # costs no pass: the surge records its wait), so a read-back pass would only cost the groups' read and a save
    model = Model(list(OLDS), desired=4, max_size=5)
    driver = Driver(model, new_run(model, OLDS))
    driver.until(handed)
    decision = driver.decisions[-1]
    assert [w.kind.evented for w in decision.waits] == [True]  # the successor's spare to launch
    assert outcome_by_event(decision)
    # a termination whose unit's receiver is not surging (any more) is not a hand-over's: the pass is read back
    giver = next(s for s in decision.run.steps if s.handed_over_to is not None)
    assert giver.state is StepState.TERMINATING
    successor = next(s for s in decision.run.steps if s.index == giver.handed_over_to)
    assert WaitDeadline.SPARE_LAUNCH.value in successor.waiting_since  # saved with the hand-over: the tick's deadline
    successor.state = StepState.UNDOING  # changed after the pass: its states read again (``Decision.states`` None)
    assert not outcome_by_event(dataclasses.replace(decision, states=None))
