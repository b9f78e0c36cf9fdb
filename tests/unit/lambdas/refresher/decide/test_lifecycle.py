"""A run's deadlines, canary and re-read sizes over hours of simulated time: the pure decision driven against a small
model of Auto Scaling and membership (``Model``) whose clock the test advances. Each test fails if a wait has no
deadline (the run would stay active for the whole simulated time) or if a deadline leaves capacity behind."""

from __future__ import annotations

from datetime import datetime, timedelta

from core.capacity import clamp
from core.runs import Run, RunStatus, StepState
from lambdas.refresher.bounds import capacity_bounds
from lambdas.refresher.decide import advance
from lambdas.refresher.plan import SetCapacity
from tests.unit.lambdas.refresher.decide.lifecycle_model import (
    HOURS,
    M1,
    M2,
    NODES,
    OLD1,
    OLD2,
    OLD3,
    OTHER,
    SETTINGS,
    T0,
    Model,
    iid,
    new_run,
)


def drive(model: Model, run: Run, donors: frozenset[str] = frozenset(), tick: float = 60) -> tuple[Run, datetime, int]:
    """Tick every ``tick`` s for ``HOURS`` hours (or until the run is over); returns the run, when it ended and the
    most steps it had in flight at once."""
    now = T0
    end = T0 + timedelta(hours=HOURS)
    in_flight_max = 0
    while now < end and run.status.active:
        for _ in range(20):  # passes of one invocation
            world = model.world(donors)
            decision = advance(run, world, SETTINGS, now)
            model.apply(decision.actions, capacity_bounds(decision.run, world, SETTINGS))
            run = decision.run
            in_flight_max = max(in_flight_max, sum(1 for s in run.steps if s.state.in_flight))
            if not decision.changed:
                break
        model.autoscale()
        now += timedelta(seconds=tick)
    return run, now, in_flight_max


def test_a_spare_that_cannot_launch_pauses_the_run_at_its_deadline_and_gives_the_surge_back() -> None:
    model = Model([OLD1, OLD2], desired=2, max_size=2, launches=False)
    run, ended, _ = drive(model, new_run(model, [OLD1, OLD2]))
    assert run.status is RunStatus.PAUSED, run.waiting
    assert "spare_launch deadline (600 s)" in run.reason
    assert ended - T0 <= timedelta(seconds=SETTINGS.spare_launch_timeout_seconds + 180)
    assert [s.state for s in run.steps] == [StepState.UNDONE, StepState.SKIPPED]
    assert (model.desired, model.max_size) == (2, 2)  # desired and the raised MaxSize restored
    assert model.instances == [OLD1, OLD2] and not model.sent and model.released


def test_the_launch_deadline_counts_from_the_surge_with_no_pass_between() -> None:
    """The surge's invocation ends after the raise (no read-back pass records the wait) and the launch event makes no
    pass: the next pass may be the tick's, past the deadline. It must pause the run then, not start the clock."""
    model = Model([OLD1, OLD2], desired=2, max_size=2, launches=False)
    surged = advance(new_run(model, [OLD1, OLD2]), model.world(frozenset()), SETTINGS, T0)
    model.apply(surged.actions, capacity_bounds(surged.run, model.world(frozenset()), SETTINGS))
    assert surged.run.steps[0].state is StepState.SURGING
    assert surged.run.steps[0].waiting_since == {"spare_launch": T0}
    later = T0 + timedelta(seconds=SETTINGS.spare_launch_timeout_seconds + 1)
    tick = advance(surged.run, model.world(frozenset()), SETTINGS, later)
    assert tick.run.status is RunStatus.PAUSING and "spare_launch deadline (600 s)" in tick.run.reason


def test_a_spare_that_never_registers_is_terminated_with_decrement_at_its_deadline() -> None:
    model = Model([OLD1, OLD2], desired=2, max_size=4, registers=False)
    run, ended, _ = drive(model, new_run(model, [OLD1, OLD2]))
    assert run.status is RunStatus.PAUSED and "spare_register deadline (900 s)" in run.reason
    assert ended - T0 <= timedelta(seconds=SETTINGS.spare_register_timeout_seconds + 240)
    assert run.steps[0].state is StepState.UNDONE and run.steps[0].surge_instance_id == iid(0x101)
    assert model.instances == [OLD1, OLD2] and (model.desired, model.max_size) == (2, 4)
    assert not model.sent and model.released  # the old nodes were never drained


def test_the_canary_a_spare_never_ready_stops_the_run_before_a_second_instance_is_touched() -> None:
    olds = [OLD1, OLD2, OLD3]
    model = Model(list(olds), desired=3, max_size=6, ready=False)
    run, _, most = drive(model, new_run(model, olds, max_surge=3))
    assert run.status is RunStatus.PAUSED and "spare_ready deadline" in run.reason
    assert most == 1  # max_surge 3, yet one step alone
    assert [s.state for s in run.steps] == [StepState.UNDONE, StepState.SKIPPED, StepState.SKIPPED]
    assert model.instances == olds and model.desired == 3
    assert [c.command.instance_id for c in model.sent] == [iid(0x101)]  # only the spare drained, to give it back


def test_after_the_canary_max_surge_steps_run_together() -> None:
    olds = [OLD1, OLD2, OLD3]
    model = Model(list(olds), desired=3, max_size=6)
    run, _, most = drive(model, new_run(model, olds, max_surge=3), tick=5)
    assert run.status is RunStatus.SUCCEEDED
    assert most == 2  # the canary alone, then the other two together
    assert not set(olds) & set(model.instances) and (model.desired, model.max_size) == (3, 6)


def test_a_node_not_ready_besides_the_spare_pauses_the_run_at_the_nodes_ready_deadline() -> None:
    model = Model([OLD1, OLD2], desired=2, max_size=4, not_ready={OLD2})  # due later, NotReady
    run, _, _ = drive(model, new_run(model, [OLD1, OLD2]))
    assert run.status is RunStatus.PAUSED and "nodes_ready deadline (900 s)" in run.reason
    assert run.steps[0].state is StepState.UNDONE and model.desired == 2
    assert model.instances.count(OLD1) == 1  # never terminated
    assert [c.command.kind.value for c in model.sent] == ["drain"]  # the spare drained before it went back


def test_masters_not_ready_after_a_replacement_fail_the_step_and_stop_the_run() -> None:
    model = Model([OLD1], desired=1, max_size=2, masters=[M1, M2], ready=False)
    run, _, _ = drive(model, new_run(model, [OLD1], masters=(M1, M2)))
    assert run.status is RunStatus.PAUSED and "master_ready deadline (900 s)" in run.reason
    assert [s.state for s in run.steps] == [StepState.FAILED, StepState.SKIPPED, StepState.SKIPPED]
    assert M2 in model.masters  # the second master untouched
    assert [c.command.instance_id for c in model.sent] == [M1]


def test_a_group_carrying_compensation_is_not_surged_and_the_run_pauses_if_it_stays_so() -> None:
    model = Model([OLD1, OTHER], desired=2, max_size=4)
    run, _, _ = drive(model, new_run(model, [OLD1]), donors=frozenset({NODES}))
    assert run.status is RunStatus.PAUSED and "group_quiet deadline (7200 s)" in run.reason
    assert model.desired == 2 and model.launched == 0


def test_the_sizes_are_read_again_before_a_groups_first_surge() -> None:
    model = Model([OLD1, OTHER], desired=2, max_size=2)
    run = new_run(model, [OLD1])
    model.desired, model.max_size = 3, 5  # changed after the run started (kOps, a compensation given back...)
    model.autoscale()
    run, _, _ = drive(model, run, tick=5)
    assert run.status is RunStatus.SUCCEEDED, run.reason
    assert (run.groups[0].original_desired, run.groups[0].original_max) == (3, 5)
    assert (model.desired, model.max_size) == (3, 5)  # not back to the sizes recorded at the start


def test_a_forged_surge_is_clamped_to_the_groups_max_size_plus_the_surge_limit() -> None:
    model = Model([OLD1, OLD2], desired=2, max_size=2)
    run = new_run(model, [OLD1])
    run.groups[0].raised = 500
    run.steps[0].state = StepState.SURGING
    world = model.world()
    decision = advance(run, world, SETTINGS, T0 + timedelta(hours=1))
    (action,) = [a for a in decision.actions if isinstance(a, SetCapacity)]
    assert (action.desired, action.max_size) == (502, 502)
    sizes = clamp(action.desired, action.max_size, capacity_bounds(decision.run, world, SETTINGS)[NODES])
    assert (sizes.desired, sizes.max_size) == (2 + SETTINGS.surge_limit, 2 + SETTINGS.surge_limit) and sizes.clamped


def test_a_forged_max_surge_starts_no_more_steps_than_the_settings_allow() -> None:
    olds = [OLD1, OLD2, OLD3]
    model = Model(list(olds), desired=3, max_size=3)
    run, _, most = drive(model, new_run(model, olds, max_surge=100), tick=5)
    assert run.status is RunStatus.SUCCEEDED, run.reason
    assert most <= SETTINGS.surge_limit and model.max_size == 3  # and MaxSize restored


def test_a_refused_max_size_restore_is_retried_until_it_reads_back() -> None:
    # soak seed 1280: a throttled UpdateAutoScalingGroup at the run's end left MaxSize raised, the run succeeded
    model = Model([OLD1, OLD2], desired=2, max_size=2, refused_max_restores=3)
    run, _, _ = drive(model, new_run(model, [OLD1, OLD2]))
    assert run.status is RunStatus.SUCCEEDED, run.waiting
    assert (model.desired, model.max_size) == (2, 2) and model.refused_max_restores == 0
    assert model.released


def test_a_max_size_reset_by_kops_at_the_runs_end_is_not_fought() -> None:
    model = Model([OLD1], desired=1, max_size=1, refused_max_restores=1)
    run = new_run(model, [OLD1])
    for _ in range(200):  # until the surge is given back and the restore asked (and refused)
        world = model.world()
        decision = advance(run, world, SETTINGS, T0)
        model.apply(decision.actions, capacity_bounds(decision.run, world, SETTINGS))
        run = decision.run
        model.autoscale()
        if model.refused_max_restores == 0:
            break
    assert model.refused_max_restores == 0 and run.status.active
    model.max_size = 7  # kOps sets the group's own MaxSize meanwhile
    decision = advance(run, model.world(), SETTINGS, T0 + timedelta(minutes=5))
    assert not [a for a in decision.actions if isinstance(a, SetCapacity)]
    assert decision.run.status is RunStatus.SUCCEEDED
