"""A run's ``RUN#`` item (core.runrecord, ``Run.to_item``): steps at rest as rows, what a final step keeps, and the
item's size as DynamoDB counts it (core.itemsize, checked against the simulation's own count)."""

from __future__ import annotations

import doctest
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import core.itemsize
from adapters.dynamo.table import dynamo, plain
from core.itemsize import item_bytes
from core.runs import GroupSurge, Run, RunOptions, RunStatus, RunStep, StepState
from sim.values import canonical_item
from sim.values import item_bytes as sim_item_bytes
from tests.unit.core.weekly_run import CLUSTER, GROUPS, ITEM_BUDGET, KEYS, RUN_ID, T0, weekly_refresh


def test_doctests() -> None:
    assert doctest.testmod(core.itemsize).failed == 0


def stored(run: Run, shed: bool = False) -> dict[str, Any]:
    """The item as ``Table.put`` writes it (keys added, None map values left out, floats as Decimal)."""
    return dict(dynamo({**run.to_item(shed=shed), **KEYS}))


def test_a_run_of_2100_finished_steps_fits_well_under_the_item_size_and_reads_back() -> None:
    run = weekly_refresh(2100, 2100)
    item = stored(run)
    size = item_bytes(item)
    assert size < ITEM_BUDGET, size  # each step as a map: about 618 B a finished step, 1.3 MB in all
    assert size == sim_item_bytes(canonical_item(item))  # the simulation's table counts it the same way
    assert Run.model_validate(plain(item)) == run.at_rest()
    # the drain's id is kept (the scenarios and an operator find the CMD# item by it), as a bit of the row
    assert run.at_rest().steps[0].command_id == f"refresh-{RUN_ID}-0" and run.at_rest().steps[0].waiting_since == {}


def test_a_run_of_2100_pending_steps_and_a_run_half_way_fit_too() -> None:
    for finished in (0, 1050):
        run = weekly_refresh(2100, finished)
        item = stored(run)
        assert item_bytes(item) < ITEM_BUDGET * 2 / 3 + finished * 140, (finished, item_bytes(item))
        assert Run.model_validate(plain(item)) == run.at_rest()


def test_steps_in_flight_and_pending_steps_with_a_wait_stay_maps_with_their_waits() -> None:
    run = weekly_refresh(5, 2)
    run.steps[2] = run.steps[2].model_copy(
        update={"state": StepState.SURGING, "surge_baseline": ["i-a", "i-b"], "waiting_since": {"spare_launch": T0}}
    )
    run.steps[3] = run.steps[3].model_copy(update={"waiting_since": {"group_quiet": T0}})
    item = stored(run)
    assert [s["index"] for s in item["steps"]] == [2, 3]  # the simulation's checker reads their waits here
    assert item["steps"][0]["waiting_since"] == {"spare_launch": T0.isoformat().replace("+00:00", "Z")}
    assert [int(r[0]) for r in item["rows"]] == [0, 1, 4]
    assert Run.model_validate(plain(item)) == run.at_rest()


def test_an_item_written_before_rows_reads_as_it_did() -> None:
    run = weekly_refresh(6, 3)
    assert Run.model_validate(run.model_dump(mode="json")) == run


def test_a_shed_item_keeps_what_decisions_and_the_other_operations_read() -> None:
    run = weekly_refresh(300, 300).model_copy(update={"status": RunStatus.PAUSING})
    item = stored(run, shed=True)
    assert item_bytes(item) < item_bytes(stored(run)) / 2
    back = Run.model_validate(plain(item))
    assert back.history_shed
    assert [(s.index, s.group, s.role, s.instance_id, s.state, s.surge_instance_id) for s in back.steps] == [
        (s.index, s.group, s.role, s.instance_id, s.state, s.surge_instance_id) for s in run.steps
    ]
    assert back.steps[0].entered == {} and back.steps[0].note == ""
    assert stored(back) == item  # saved again, still shed


def test_a_step_that_handed_its_unit_over_keeps_its_successor_in_its_row_at_no_extra_byte() -> None:
    run = weekly_refresh(30, 30)
    plain_size = item_bytes(stored(run))
    for step in run.steps[:-3]:
        step.handed_over_to = step.index + 3  # the next step of its group (3 groups, steps round-robin)
    item = stored(run)
    assert not item["steps"] and len(item["rows"]) == 30  # all rows still
    assert item_bytes(item) == plain_size  # 8 x 3 + 1 = 25: as many digits as 1
    back = Run.model_validate(plain(item))
    assert back == run.at_rest()
    assert [s.handed_over_to for s in back.steps] == [*range(3, 30), None, None, None]
    assert back.steps[0].command_id == f"refresh-{RUN_ID}-0"  # the command bits are still read apart


def test_a_step_handed_over_to_an_earlier_index_stays_a_map() -> None:
    run = weekly_refresh(4, 4)
    run.steps[2].handed_over_to = 1
    item = stored(run)
    assert [s["index"] for s in item["steps"]] == [2] and item["steps"][0]["handed_over_to"] == 1
    assert Run.model_validate(plain(item)) == run.at_rest()


stamps = st.datetimes(
    min_value=datetime(2026, 1, 1), max_value=datetime(2027, 1, 1), timezones=st.just(UTC)
)  # any microsecond
words = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)


@st.composite
def steps(draw: st.DrawFn, index: int) -> RunStep:
    state = draw(st.sampled_from(list(StepState)))
    optional = st.none() | stamps
    iid = f"i-{index:017x}"
    entered = draw(st.dictionaries(st.sampled_from([s.value for s in StepState]), stamps, max_size=6))
    return RunStep(
        index=index,
        group=draw(st.sampled_from([*GROUPS, "other-group"])),
        role=draw(st.sampled_from(["node", "node", "control-plane"])),
        instance_id=iid,
        node_name=draw(st.none() | st.just(iid) | words),
        needs_update=draw(words),
        state=state,
        surge_baseline=draw(st.lists(st.just("i-b"), max_size=2)),
        surge_instance_id=draw(st.none() | st.just("i-spare")),
        command_id=draw(st.none() | words),
        drain_status=draw(st.none() | words),
        drain_message=draw(st.none() | words),
        intent_at=draw(optional),
        settle_first_ok_at=draw(optional),
        waiting_since=draw(st.dictionaries(st.just("spare_launch"), stamps, max_size=1)),
        entered=entered,
        spare_ready_at=draw(optional),
        handed_over_to=draw(st.none() | st.integers(min_value=0, max_value=40)),
        started_at=draw(optional),
        finished_at=draw(optional),
        note=draw(words),
    )


@st.composite
def runs(draw: st.DrawFn) -> Run:
    count = draw(st.integers(min_value=0, max_value=12))
    plan = [RunStep(index=k, group=GROUPS[k % 3], role="node", instance_id=f"i-{k:017x}") for k in range(count)]
    chosen = [draw(st.none() | steps(k)) for k in range(count)]
    return Run(
        run_id="r1",
        cluster=CLUSTER,
        options=RunOptions(),
        created_at=draw(stamps),
        updated_at=T0,
        groups=[GroupSurge(name=g, role="node", min_size=1, original_desired=1, original_max=1) for g in GROUPS],
        steps=[c if c is not None else p for c, p in zip(chosen, plan, strict=True)],
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs())
def test_every_run_reads_back_as_it_is_at_rest(run: Run) -> None:
    # through the table's conversions both ways (as DynamoDB stores it: numbers as Decimal)
    item = plain(canonical_item(stored(run)))
    assert Run.model_validate(item) == run.at_rest()
    assert Run.model_validate(item).to_item() == run.at_rest().to_item()
