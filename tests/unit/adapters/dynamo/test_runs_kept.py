"""``RunStore.read``: the run a store last saved, read back at the version that save wrote, is what validating the
item gives, without unpacking its rows; any other item is validated (moto's DynamoDB)."""

from datetime import timedelta

from adapters.dynamo.runs import RunStore
from adapters.dynamo.snapshot import read_state
from adapters.dynamo.store import Store
from bench.run_item import run as weekly
from core.runs import Run, RunStatus, StepState


def _in_flight(r: Run, index: int) -> Run:
    """``r`` with step ``index`` surging (a pass's own copy of it)."""
    steps = list(r.steps)
    steps[index] = steps[index].model_copy(
        update={"state": StepState.SURGING, "surge_baseline": ["i-a", "i-b"], "intent_at": r.updated_at}
    )
    return r.model_copy(update={"steps": steps})


def _done(r: Run, index: int) -> Run:
    """``r`` with step ``index`` done, still holding what a final step's item drops (as a pass leaves it)."""
    steps = list(r.steps)
    at = r.updated_at + timedelta(seconds=index)
    steps[index] = steps[index].model_copy(
        update={"state": StepState.DONE, "finished_at": at, "intent_at": at, "waiting_since": {"termination": at}}
    )
    return r.model_copy(update={"steps": steps})


def _plain(store: Store) -> Run:
    (active,) = read_state(store).runs
    return active


def test_a_saved_run_read_back_is_the_validated_item_and_each_read_gets_its_steps_in_flight_copied(
    store: Store,
) -> None:
    runs = RunStore(store)
    current = weekly(12, 6)
    runs.create(current)
    first = RunStore(store).get(current.run_id)  # validated: another store's read
    assert first is not None
    saved = runs.save(_done(_in_flight(first, 7), 6))
    saved.steps[7].surge_baseline.append("i-y")  # the saved run decided on again in-process: the kept one unchanged
    for change in (lambda r: _in_flight(r, 8), lambda r: _done(r, 7), lambda r: r.model_copy(update={"reason": "x"})):
        (read,) = read_state(store, runs).runs
        assert read == _plain(store) and read.version == saved.version
        assert read is not runs.read({"run_id": read.run_id, "version": read.version})  # each read its own run
        again = runs.read({"run_id": read.run_id, "version": read.version})
        for mine, other in zip(read.steps, again.steps, strict=True):
            assert (mine is other) is (not mine.state.in_flight)  # at rest shared, in flight copied
        assert read.groups[0] is not again.groups[0]
        for step in read.steps:  # a pass changing its own copy of a step in flight changes no other read
            if step.state.in_flight:
                step.surge_baseline.append("i-z")
        assert runs.read({"run_id": read.run_id, "version": read.version}) == _plain(store)
        saved = runs.save(change(_plain(store)))


def test_an_item_at_another_version_or_of_another_run_is_validated(store: Store) -> None:
    runs, other = RunStore(store), RunStore(store)
    current = weekly(6, 3)
    runs.create(current)
    saved = runs.save(current)
    other.save(saved.model_copy(update={"reason": "saved elsewhere"}))  # the same version number is never written
    (read,) = read_state(store, runs).runs
    assert read.reason == "saved elsewhere" and read == _plain(store)
    refused = other.record_refusal(read, "too large", read.updated_at)
    (read,) = read_state(store, other).runs
    assert read.status is RunStatus.PAUSING and read == _plain(store) and read.version == refused.version
