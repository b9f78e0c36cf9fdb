"""``run_summary``'s step counts: by state, in the order each state first occurs, as counting each step's value."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from bench.run_pass import scenario
from core.runs import StepState
from lambdas.refresher.summary import run_summary


@given(st.lists(st.sampled_from(list(StepState)), max_size=12))
@settings(max_examples=200, deadline=None)
def test_counts_are_each_step_s_state_value_counted(states: list[StepState]) -> None:
    run, _ = scenario(3)
    step = run.steps[0]
    run.steps = [step.model_copy(update={"index": k, "state": s}) for k, s in enumerate(states)]
    counts = run_summary(run)["steps"]
    plain = dict(Counter(s.state.value for s in run.steps))
    assert counts == plain and list(counts) == list(plain)
