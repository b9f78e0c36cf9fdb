"""A surging step's record keeps only the waits it is in: once the spare launched, its ``spare_launch`` wait is over
(storm seed 185078: a spare that launched and registered late under a refresher outage left ``spare_launch`` in the
record 40 minutes after the launch, read as a wait past its deadline). A wait after the current one, begun before the
step went back (its spare gone), keeps its clock. Pure."""

from __future__ import annotations

from datetime import timedelta

from core.runs import StepState
from lambdas.refresher.bounds import capacity_bounds
from lambdas.refresher.decide import advance
from tests.unit.lambdas.refresher.decide.lifecycle_model import OLD1, OLD2, SETTINGS, T0, Model, new_run


def test_a_spare_launched_ends_the_spare_launch_wait_and_its_registration_starts_its_own() -> None:
    model = Model([OLD1, OLD2], desired=2, max_size=4, registers=False)
    surged = advance(new_run(model, [OLD1, OLD2]), model.world(), SETTINGS, T0)
    model.apply(surged.actions, capacity_bounds(surged.run, model.world(), SETTINGS))
    assert surged.run.steps[0].waiting_since == {"spare_launch": T0}
    model.autoscale()  # the spare launched; its node never registers
    later = T0 + timedelta(seconds=120)
    seen = advance(surged.run, model.world(), SETTINGS, later)
    step = seen.run.steps[0]
    assert step.state is StepState.SURGING and step.waiting_since == {"spare_register": later}
    model.instances.pop()  # the spare gone (reclaimed) before it registered: back to waiting for a launch
    back = advance(seen.run, model.world(), SETTINGS, later + timedelta(seconds=60))
    assert back.run.steps[0].waiting_since == {"spare_launch": later + timedelta(seconds=60), "spare_register": later}
