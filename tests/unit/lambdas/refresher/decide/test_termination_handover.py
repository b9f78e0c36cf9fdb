"""A step that handed its surge unit over and whose old instance Auto Scaling keeps in service past the termination
deadline (a review finding on 171dd03). The successor's spare was to be Auto Scaling's replacement of that very
instance, which never launches: left the unit, the successor waited for a launch with no deadline, the run never
ended and desired capacity stayed one above. The giver takes the unit back and gives it back with its own spare
(``handover.take_back``). Pure (``lifecycle_model.Model``, ``handover_driver.Driver``)."""

from __future__ import annotations

import pytest

from core.runs import RunStatus, StepState
from tests.unit.lambdas.refresher.decide.handover_driver import OLD2, OLDS, Driver, Slow, handed
from tests.unit.lambdas.refresher.decide.lifecycle_model import new_run


@pytest.mark.parametrize("cancel", [False, True])
def test_a_kept_hand_over_giver_leaves_a_unit_its_successor_can_give_back(cancel: bool) -> None:
    model = Slow(list(OLDS), desired=4, max_size=5, refused_handovers=10**6)  # OLD2's termination always refused
    driver = Driver(model, new_run(model, OLDS))
    driver.until(handed)
    if cancel:
        driver.run = driver.run.model_copy(update={"cancel_requested": True})
    for _ in range(6 * 60):
        if not driver.run.status.active:
            break
        driver.invocation()
    run = driver.run
    steps = [(s.index, s.state.value, s.note) for s in run.steps]
    # invariant 8: the run ends (it stayed pausing or cancelling, "a spare of nodes-a.c to give back")
    assert not run.status.active, (run.status, run.waiting, steps)
    assert run.status is (RunStatus.CANCELLED if cancel else RunStatus.PAUSED)
    assert OLD2 in model.instances and run.steps[1].state is StepState.UNDONE  # kept, as the commit intends
    # invariant 4: desired capacity back where it was, no extra instance (it stayed desired 5, raised 1, 5 instances)
    assert (model.desired, len(model.instances), run.groups[0].raised) == (4, 4, 0), steps
