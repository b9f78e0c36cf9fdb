"""``Context.states``, ``owned`` and ``in_flight`` (the states read again only where the pass owns a step) answer as
reading every step does, whatever the pass owned and changed."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bench.run_pass import SETTINGS, scenario
from core.runs import StepState
from lambdas.refresher.decide.context import Context
from lambdas.refresher.world import World


@given(
    st.lists(st.sampled_from(list(StepState)), min_size=12, max_size=12),
    st.lists(st.tuples(st.integers(0, 11), st.sampled_from(list(StepState))), max_size=6),
)
@settings(max_examples=300, deadline=None)
def test_states_are_every_steps_after_the_pass_changed_those_it_owns(
    began: list[StepState], changes: list[tuple[int, StepState]]
) -> None:
    base, _ = scenario(12)
    run = base.model_copy(
        update={"steps": [s.model_copy(update={"state": state}) for s, state in zip(base.steps, began, strict=True)]}
    )
    p = Context(run, World(), SETTINGS, run.updated_at)
    assert p.states() == began
    assert p.groups() == [s.group for s in run.steps]
    for position, state in changes:
        step = p.run.steps[position]
        if step.state.final:  # a pass never changes a final step
            continue
        p.own(step).state = state
    assert p.states() == [s.state for s in p.run.steps]
    assert p.in_flight() == [s for s in p.run.steps if s.state.in_flight]
    owned = {position for position, _ in changes if not began[position].final}  # ``own``ed, or in flight already
    owned |= {k for k, state in enumerate(began) if state.in_flight}
    assert p.owned() == [p.run.steps[k] for k in sorted(owned)]
    assert [s.state for s in run.steps] == began  # the run read is as it was
