"""A table on moto's DynamoDB for the executor's tests (``store``).

Every decision these tests make is held to leaving the run it read as it was: ``Run.working_copy`` shares the
steps at rest with that run (and a warm environment hands them to its next pass), so a rule that changed a pending
step without ``Context.own``, or a final one, would change the run as read too; and ``Context.states`` (read again
only where the pass owns a step) would no longer be every step's state."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

import lambdas.refresher.decide as decide
from adapters.dynamo.store import Store
from core.runs import Run
from core.schema import state_table
from lambdas.refresher.decide.context import Context, Decision
from lambdas.refresher.decide.lifecycle import decide_pass
from lambdas.refresher.passes import looked_at_commands, may_start_a_group, outcome_by_event
from lambdas.refresher.summary import run_summary


class _Checked(Context):
    """A ``Context`` that keeps the run it was given and a deep copy of it."""

    def __init__(self, run: Run, *args: Any, **kwargs: Any) -> None:
        super().__init__(run, *args, **kwargs)
        self.read, self.read_before = run, run.model_copy(deep=True)


@pytest.fixture(autouse=True)
def _decisions_leave_the_run_read_as_it_was(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def checked(p: Context) -> Decision:
        decision = decide_pass(p)
        if isinstance(p, _Checked):
            assert p.read == p.read_before, "a decision changed the run it read"
            assert [s.model_fields_set for s in p.read.steps] == [s.model_fields_set for s in p.read_before.steps]
            # only the steps the pass owns changed: its states read again at their positions alone are all of them
            assert p.states() == [s.state for s in p.run.steps], "a step the pass does not own changed state"
            assert p.in_flight() == [s for s in p.run.steps if s.state.in_flight]
        states = [s.state for s in decision.run.steps]
        assert decision.states is None or decision.states == states, "a decision's states are not its run's"
        # what reads the states given answers as what reads them itself
        unread = dataclasses.replace(decision, states=None)
        assert outcome_by_event(decision) == outcome_by_event(unread)
        assert run_summary(decision.run, states=states) == run_summary(decision.run)
        assert looked_at_commands(decision.run, states) == looked_at_commands(decision.run)
        assert may_start_a_group(decision.run, states) == may_start_a_group(decision.run)
        return decision

    monkeypatch.setattr(decide, "Context", _Checked)
    monkeypatch.setattr(decide, "decide_pass", checked)
    yield


@pytest.fixture
def store() -> Iterator[Store]:
    with mock_aws():
        ddb = boto3.resource("dynamodb", region_name="us-east-1")
        ddb.create_table(**state_table("state"))
        yield Store(ddb.Table("state"), "demo")
