"""A refresh run's chart from its RUN# record: the record as the refresher's own decider writes it (a worker step
driven through every state on synthetic worlds), a hand-made record with a master and a given-back surge, and a record
written before the step timestamps existed."""

from __future__ import annotations

from charts.model import Phase
from charts.runrecord import run_chart
from core.runs import GroupSurge, Run, RunOptions, RunStatus, RunStep, StepState
from tests.unit.charts.decided_run import NODES, OLD, SPARE, T0, at, worker_run_through_the_decider


def test_the_refresher_records_when_each_step_entered_each_state_and_saw_its_spare_ready() -> None:
    run = worker_run_through_the_decider()
    assert run.status is RunStatus.SUCCEEDED
    (step,) = run.steps
    assert step.entered == {"surging": at(0), "draining": at(10), "terminating": at(20), "done": at(30)}
    assert step.spare_ready_at == at(10) and step.surge_instance_id == SPARE
    assert Run.model_validate(run.to_item()).steps[0].entered == step.entered  # stored and read back


def test_a_decided_run_gives_a_row_per_instance_and_the_groups_ready_nodes() -> None:
    chart = run_chart(worker_run_through_the_decider())
    assert [r.instance_id for r in chart.rows] == [OLD, SPARE]
    old, spare = chart.rows
    assert [(s.phase, s.start, s.end) for s in old.spans] == [
        (Phase.SURGE, 0, 10),
        (Phase.DRAIN, 10, 20),
        (Phase.TERMINATE, 20, 30),
    ]
    assert [(s.phase, s.start, s.end) for s in spare.spans] == [(Phase.LAUNCH, 0, 10), (Phase.READY, 10, 30)]
    assert [m.what for m in old.markers] == ["drain succeeded", "done"] and spare.markers[0].at == 10
    (pool,) = chart.pools
    assert pool.pool == "nodes-a" and pool.points == [(0, 2), (10, 3), (20, 2)]  # spare Ready, then old terminated


def test_a_master_and_a_given_back_surge() -> None:
    masters = "master-a.masters.c"
    run = Run(
        run_id="r2",
        cluster="c",
        status=RunStatus.PAUSED,
        reason="drain of n-04 failed",
        options=RunOptions(),
        created_at=T0,
        updated_at=at(61),
        finished_at=at(61),
        groups=[
            GroupSurge(name=masters, role="control-plane", min_size=1, original_desired=1, original_max=1),
            GroupSurge(name=NODES, role="node", min_size=1, original_desired=2, original_max=2),
        ],
        steps=[
            RunStep(
                index=0,
                group=masters,
                role="control-plane",
                instance_id="i-m",
                state=StepState.DONE,
                started_at=at(1),
                finished_at=at(20),
                settle_first_ok_at=at(14),
                entered={"draining": at(1), "terminating": at(6), "settling": at(9), "done": at(20)},
                drain_status="succeeded",
            ),
            RunStep(
                index=1,
                group=NODES,
                role="node",
                instance_id="i-4",
                state=StepState.UNDONE,
                surge_instance_id="i-5",
                started_at=at(41),
                finished_at=at(60),
                spare_ready_at=at(45),
                entered={"surging": at(41), "draining": at(46), "undo_draining": at(50), "undone": at(60)},
                drain_status="failed",
            ),
            RunStep(index=2, group=NODES, role="node", instance_id="i-6", state=StepState.SKIPPED, finished_at=at(60)),
        ],
    )
    chart = run_chart(run)
    assert [r.instance_id for r in chart.rows] == ["i-m", "i-4", "i-5", "i-6"]
    assert [s.phase for s in chart.rows[0].spans] == [Phase.DRAIN, Phase.TERMINATE, Phase.SETTLE]
    assert [s.phase for s in chart.rows[1].spans] == [Phase.SURGE, Phase.DRAIN, Phase.UNDO]
    assert [s.phase for s in chart.rows[2].spans] == [Phase.LAUNCH, Phase.READY, Phase.DRAIN]  # the spare, given back
    assert chart.rows[3].spans == []  # skipped: never started
    points = {p.pool: p.points for p in chart.pools}
    assert points == {"master-a.masters": [(0, 1), (6, 0), (14, 1)], "nodes-a": [(0, 2), (45, 3)]}
    assert "paused" in chart.title and chart.end == 61


def test_a_record_from_before_the_step_timestamps_gives_one_bar_per_step() -> None:
    # the item as written before steps had times (and before steps at rest became rows): every step a map
    item = worker_run_through_the_decider().model_dump(mode="json")
    for step in item["steps"]:
        del step["entered"], step["spare_ready_at"]
    chart = run_chart(Run.model_validate(item))
    old, spare = chart.rows
    assert [(s.phase, s.start, s.end) for s in old.spans] == [(Phase.SURGE, 0, 30)]
    assert spare.instance_id == SPARE and spare.spans == []  # when it was Ready is not in the record
    assert chart.pools[0].points == [(0, 2)]
