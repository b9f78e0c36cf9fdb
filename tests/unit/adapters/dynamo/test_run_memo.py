"""``RunMemo``: a read of exactly the ``RUN#`` item last saved or read is answered with its run, never shared mutable;
any other item (changed, forged or retyped at the same version) is validated; bounded. Then ``RunStore`` with it on
moto's DynamoDB."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from pydantic import ValidationError

from adapters.dynamo import run_memo
from adapters.dynamo.run_memo import RunMemo, same
from adapters.dynamo.runs import RunStore
from adapters.dynamo.store import Store
from adapters.dynamo.table import dynamo, plain
from core.runs import Run, RunStatus, StepState
from sim.values import canonical_item
from tests.unit.core.test_runrecord import KEYS, runs, weekly_refresh


def sent(run: Run) -> dict[str, Any]:
    """What ``RunStore`` gives ``Table.put`` (attributes and keys)."""
    return {**run.to_item(), **KEYS}


def read_back(item: dict[str, Any]) -> dict[str, Any]:
    """``item`` as a read answers it after ``Table.put`` wrote it (None map values left out, numbers via Decimal)."""
    return plain(canonical_item(dict(dynamo(item))))


def in_flight(run: Run) -> Run:
    """``run`` with its first pending step surging (a map in the item, with a wait and a baseline)."""
    k = next(i for i, s in enumerate(run.steps) if s.state is StepState.PENDING)
    surging = run.steps[k].model_copy(
        update={
            "state": StepState.SURGING,
            "surge_baseline": ["i-a", "i-b"],
            "waiting_since": {"spare_launch": run.updated_at},
            "intent_at": run.updated_at,
        }
    )
    return run.model_copy(update={"steps": [*run.steps[:k], surging, *run.steps[k + 1 :]]})


def sample() -> Run:
    """12 steps, 6 done (the first named by its instance id: ``True`` in its row), one surging."""
    run = in_flight(weekly_refresh(12, 6))
    first = run.steps[0].model_copy(update={"node_name": run.steps[0].instance_id})
    return run.model_copy(update={"steps": [first, *run.steps[1:]]})


def test_the_item_just_saved_reads_as_validation_gives_it_without_validating() -> None:
    run = in_flight(weekly_refresh(30, 20))
    memo = RunMemo()
    memo.saved(sent(run), run)
    item = read_back(sent(run))
    got = memo.read(item)
    assert memo.hits == 1
    assert got == Run.model_validate(item) == run.at_rest()
    assert got.to_item() == Run.model_validate(item).to_item()
    again = memo.read(read_back(sent(run)))  # and the next read of it too
    assert memo.hits == 2 and again == got


def test_a_read_is_kept_and_answers_the_next_read_of_the_same_item() -> None:
    item = read_back(sent(in_flight(weekly_refresh(12, 6))))
    memo = RunMemo()
    first = memo.read(item)
    assert memo.hits == 0
    assert memo.read(copy.deepcopy(item)) == first and memo.hits == 1


def test_a_run_handed_out_is_never_shared_mutable() -> None:
    run = in_flight(weekly_refresh(12, 6))
    memo = RunMemo()
    memo.saved(sent(run), run)
    item = read_back(sent(run))
    one = memo.read(item)
    surging = next(s for s in one.steps if s.state is StepState.SURGING)
    surging.waiting_since["spare_ready"] = run.created_at
    surging.surge_baseline.append("i-c")
    surging.state = StepState.DRAINING
    one.groups[0].raised = 7
    one.status = RunStatus.PAUSING
    one.steps.pop()
    two = memo.read(item)
    assert memo.hits == 2
    assert two == run.at_rest() == Run.model_validate(item)
    # what the saver changes after its save changes nothing kept either (its steps at rest are shared: no code
    # changes one in place, ``core.runs._read_copy``; its groups and steps in flight are copied)
    next(s for s in run.steps if s.state is StepState.SURGING).waiting_since.clear()
    run.groups[1].raised = 3
    run.status = RunStatus.CANCELLING
    assert memo.read(item) == Run.model_validate(item)


def retyped(item: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Copies of ``item`` at the same version, each changed in one way ``==`` alone does not see, or forged."""
    out = []
    row = next(k for k, r in enumerate(item["rows"]) if r[3] is True)
    flip = copy.deepcopy(item)
    flip["rows"][row][3] = 1  # node_name True (the instance id) as a number: equal by ``==``
    out.append(("node_name True as 1", flip))
    number = copy.deepcopy(item)
    number["rows"][row][0] = float(number["rows"][row][0])  # an index as a float
    out.append(("index as a float", number))
    flag = copy.deepcopy(item)
    flag["cancel_requested"] = 0  # a bool as a number
    out.append(("bool as a number", flag))
    forged = copy.deepcopy(item)
    forged["rows"][row][2] = "i-0000000000forged"
    out.append(("forged instance", forged))
    status = copy.deepcopy(item)
    status["status"] = "pausing"
    out.append(("forged status", status))
    extra = copy.deepcopy(item)
    extra["steps"][0]["note"] = "forged"
    out.append(("forged map", extra))
    fewer = copy.deepcopy(item)
    del fewer["surge_instance_ids"]  # one the run does not read: still not the item kept
    out.append(("an attribute less", fewer))
    return out


@pytest.mark.parametrize("name", [name for name, _ in retyped(read_back(sent(sample())))])
def test_an_item_retyped_or_forged_at_the_same_version_is_validated(name: str) -> None:
    run = sample()
    memo = RunMemo()
    memo.saved(sent(run), run)
    item = dict(retyped(read_back(sent(run))))[name]
    assert item["version"] == run.version
    try:
        expected: Run | None = Run.model_validate(item)
    except ValidationError:
        expected = None
    if expected is None:
        with pytest.raises(ValidationError):
            memo.read(item)
    else:
        assert memo.read(item) == expected
    assert memo.hits == 0


def test_a_shed_item_is_not_kept() -> None:
    run = weekly_refresh(12, 6).model_copy(update={"status": RunStatus.PAUSING})
    memo = RunMemo()
    shed = {**run.to_item(shed=True), **KEYS}
    memo.saved(shed, run)
    assert memo.read(read_back(shed)) == Run.model_validate(read_back(shed)) and memo.hits == 0


def test_the_memo_keeps_the_last_runs_only() -> None:
    memo = RunMemo()
    items = []
    for k in range(run_memo.MEMO_RUNS + 2):
        run = weekly_refresh(6, 3).model_copy(update={"run_id": f"r{k}"})
        item = {**run.to_item(), "pk": KEYS["pk"], "sk": f"RUN#r{k}"}
        memo.saved(item, run)
        items.append(read_back(item))
    assert len(memo._kept) == run_memo.MEMO_RUNS
    memo.read(items[0])  # forgotten: validated (and kept again)
    assert memo.hits == 0
    memo.read(items[-1])
    assert memo.hits == 1


def test_same_is_equality_of_values_and_types() -> None:
    assert same({"a": [1, "x", None, True, 1.5]}, {"a": [1, "x", None, True, 1.5]})
    assert same({"a": 1, "b": 2}, {"b": 2, "a": 1})  # a map's order aside
    for a, b in [(True, 1), (1, 1.0), (0.0, -0.0), ([1], (1,)), ({"a": None}, {}), ({1}, {1}), ("1", 1)]:
        assert not same(a, b) and not same(b, a)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs())
def test_every_run_saved_reads_back_from_the_memo_as_validation_gives_it(run: Run) -> None:
    memo = RunMemo()
    memo.saved(sent(run), run)
    item = read_back(sent(run))
    got = memo.read(item)
    validated = Run.model_validate(item)
    assert got == validated and got.to_item() == validated.to_item()


def test_the_store_answers_a_read_of_its_own_save_and_validates_another_writers(store: Store) -> None:
    mine, other = RunStore(store), RunStore(store)
    run = in_flight(weekly_refresh(12, 6))
    mine.create(run)
    got = mine.get(run.run_id)
    assert got is not None and mine.memo.hits == 1 and got == run.at_rest()
    saved = mine.save(got.model_copy(update={"reason": "mine"}))
    assert mine.active() == saved.at_rest() and mine.memo.hits == 2
    theirs = other.get(run.run_id)
    assert theirs is not None and other.memo.hits == 0
    other.save(theirs.model_copy(update={"reason": "theirs"}))
    now = mine.get(run.run_id)
    assert now is not None and now.reason == "theirs" and now.version == saved.version + 1
    assert mine.memo.hits == 2  # another writer's item: validated
