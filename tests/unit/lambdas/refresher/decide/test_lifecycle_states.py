"""``decide_pass`` passes over the states no step is in, and still handles a step a handler moved into a later
state in the same pass (the states present are read again after each handler), as looking at every step does."""

from __future__ import annotations

from datetime import timedelta

import pytest

from bench.run_pass import SETTINGS, scenario
from core.runs import RunStep, StepState
from lambdas.refresher.decide import advance, lifecycle
from lambdas.refresher.decide.context import Context

ORDER = [
    StepState.TERMINATING,
    StepState.UNDO_TERMINATING,
    StepState.SETTLING,
    StepState.DRAINING,
    StepState.UNDO_DRAINING,
    StepState.SURGING,
    StepState.UNDOING,
]


@pytest.mark.parametrize("into", ORDER)
def test_a_step_moved_into_a_state_is_handled_again_only_if_that_state_comes_later(
    into: StepState, monkeypatch: pytest.MonkeyPatch
) -> None:
    run, world = scenario(30)
    calls: list[tuple[StepState, int]] = []

    def handler(state: StepState) -> object:
        def handle(p: Context, step: RunStep) -> None:
            calls.append((state, step.index))
            if state is StepState.SURGING:
                step.state = into  # what a rule does to a step in flight: moves it on, in the pass's copy

        return handle

    for state, name in zip(ORDER, [h.__name__ for h in _handlers()], strict=True):
        monkeypatch.setattr(lifecycle, name, handler(state))
    surging = next(s.index for s in run.steps if s.state is StepState.SURGING)
    advance(run, world, SETTINGS, run.updated_at + timedelta(seconds=5))
    later = ORDER.index(into) > ORDER.index(StepState.SURGING)
    assert calls == [(StepState.SURGING, surging)] + ([(into, surging)] if later else [])


def _handlers() -> list[object]:
    return [
        lifecycle.terminating,
        lifecycle.undo_terminating,
        lifecycle.settling,
        lifecycle.draining,
        lifecycle.undo_draining,
        lifecycle.surging,
        lifecycle.undoing,
    ]
