"""Review of ``worker.track_floor`` / ``worker.floor`` and the MaxSize restore at ``max(original_max,
original_desired)`` (commit be244c3): combinations of kOps' MinSize and MaxSize writes under a run's surge units.
Each test drives the pure decision API pass by pass with the sizes Auto Scaling would show. Pure."""

from __future__ import annotations

from datetime import datetime, timedelta

from core.kops import Role
from core.runs import GroupSurge, Run, RunOptions, RunStatus, RunStep, Selection, StepState
from lambdas.refresher.decide import advance
from lambdas.refresher.plan import SendCommand, TerminateInstance
from lambdas.refresher.world import GroupFacts, InstanceFacts, World
from tests.unit.lambdas.refresher.decide_world import (
    DRAINED,
    NODES,
    OLD,
    OTHER,
    SETTINGS,
    SPARE,
    T0,
    caps,
    effects,
    node,
    two_undoing,
)

NEW = "i-00000000000000009"  # Auto Scaling's replacement of a terminated (no decrement) old instance
S3, S4 = "i-00000000000000004", "i-00000000000000005"


def at(
    instances: list[str],
    min_size: int,
    desired: int,
    max_size: int,
    ready: list[str] | None = None,
    **commands: object,
) -> World:
    """The group as Auto Scaling shows it: ``instances`` live (``ready`` Ready: all by default), its three sizes,
    the run's commands."""
    group = GroupFacts(
        NODES,
        Role.NODE,
        "nodes-a",
        min_size,
        max_size,
        desired,
        tuple(InstanceFacts(i, launch_template_version="1") for i in instances),
        "1",
    )
    ready = instances if ready is None else ready
    nodes = {i: node(i) for i in ready}
    return World(groups={NODES: group}, nodes=nodes, commands=commands, membership_confirmed=True)


def two_steps(
    min_size: int, desired: int, max_size: int, first: StepState, raised: int, max_surge: int = 1, **step0: object
) -> Run:
    """A run over ``OLD`` (step 0, in ``first``) and ``OTHER`` (step 1, pending) of a group found at the sizes
    given; ``raised`` units in place, MaxSize raised to hold them when the group had no room."""
    held = desired + raised
    group = GroupSurge(
        name=NODES,
        role="node",
        min_size=min_size,
        original_desired=desired,
        original_max=max_size,
        raised=raised,
        max_raised_to=held if held > max_size else None,
    )
    steps = [
        RunStep(
            index=0,
            group=NODES,
            role="node",
            instance_id=OLD,
            state=first,
            intent_at=T0,
            surge_baseline=[OLD, OTHER],
            started_at=T0,
            **step0,
        ),
        RunStep(index=1, group=NODES, role="node", instance_id=OTHER),
    ]
    return Run(
        run_id="r1",
        cluster="c",
        options=RunOptions(selection=Selection.ALL, max_surge=max_surge),
        created_at=T0,
        updated_at=T0,
        groups=[group],
        steps=steps,
    )


def run_one(state: StepState, **step0: object) -> Run:
    """A run of ``OLD`` alone in a group of own size 2 (MinSize 1, MaxSize 2 raised to 3), one unit in place,
    pausing when ``state`` gives the unit back."""
    r = two_steps(1, 2, 2, state, 1, **step0)
    r.steps = r.steps[:1]
    if state in (StepState.UNDOING, StepState.UNDO_DRAINING, StepState.UNDO_TERMINATING):
        r.status = RunStatus.PAUSING
    return r


def second_draining(r: Run) -> None:
    """Step 1 (``OTHER``) of ``two_steps`` draining too, its spare ``S3``, its drain ``refresh-r1-1``."""
    update = {"state": StepState.DRAINING, "intent_at": T0, "started_at": T0, "surge_instance_id": S3}
    update |= {"command_id": "refresh-r1-1", "surge_baseline": [OLD, OTHER]}
    r.steps[1] = r.steps[1].model_copy(update=update)


def minutes(n: float) -> datetime:
    return T0 + timedelta(minutes=n)


def test_a_unit_absorbed_then_clamped_by_kops_is_not_kept_by_the_max_size_restore() -> None:
    """Own size 2 (MinSize 1, MaxSize 2), ``max_surge`` 1, steps OLD and OTHER. Under step 0's unit (desired 3, MaxSize
    raised to 3) kOps resizes +1 (MinSize 3, MaxSize 3): the unit is the group's own, absorbed (own size 3). Under
    step 1's surge (desired 4, MaxSize 4) kOps resizes -1 (MinSize 2, MaxSize 2): Auto Scaling clamps desired
    capacity to 2, the group's own size is 2 (without the run: 2 -> 3 -> 2). ``surging`` reads MaxSize 2 = the
    ``original_max`` it found, not a reset, and raises again to 4 (MaxSize 4). Step 1 ends with a decrement (3).
    The group should end at kOps' 2 / MaxSize 2; the restore now asks MaxSize ``max(original_max,
    original_desired)`` = 3, keeping desired capacity 3 and MaxSize 3 above kOps' spec for good (before be244c3: 2,
    though that clamp terminated an instance undrained: ``original_desired`` never follows kOps' clamp).

    The simulator shows it (seed 340200, 0.2 days, resize profile, schedule: ``manual_refresh`` us-east-1a at 3600 s
    with ``max_surge`` 1, ``kops_spec`` grow +1 at 3700 s, grow -1 at 3800 s, ``above``/``below`` 0): "4 sizes end
    where they were: nodes-us-east-1a ends at desired 11 MaxSize 11, was 10/10"; before be244c3: "4 no size change
    of ours lets Auto Scaling choose instances to scale in"."""
    r = two_steps(1, 2, 2, StepState.TERMINATING, 1, surge_instance_id=SPARE, command_id="refresh-r1-0")
    # pass 1: kOps +1 read: MinSize 3 over the unit; the terminate goes without decrement
    d = advance(r, at([OLD, OTHER, SPARE], 3, 3, 3), SETTINGS, minutes(5))
    assert d.run.groups[0].min_size == 3
    assert [t.decrement for t in effects(d, TerminateInstance)] == [False]
    # pass 2: OLD left, Auto Scaling replaced it (NEW): the unit absorbed (own 3); step 1 surges to 4
    d = advance(d.run, at([OTHER, SPARE, NEW], 3, 3, 3), SETTINGS, minutes(10))
    assert d.run.steps[0].state is StepState.DONE
    assert d.run.groups[0].original_desired == 3 and d.run.groups[0].raised == 1
    assert caps(d) == [(NODES, 4, 4)]
    # pass 3: kOps -1 (MinSize 2, MaxSize 2) before the spare launched: desired 4 -> 2, NEW scaled in
    d = advance(d.run, at([OTHER, SPARE], 2, 2, 2), SETTINGS, minutes(11))
    assert d.run.groups[0].min_size == 2  # the floor follows the clamp
    assert d.run.groups[0].original_desired == 2  # so does the group's own size (before the fix: 3)
    assert caps(d) == [(NODES, 3, 3)]  # the unit raised again over the own size 2 (before: 4, over 3)
    # pass 4: the spare launched (S3), all Ready: drain OTHER
    d = advance(d.run, at([OTHER, SPARE, S3], 2, 3, 3), SETTINGS, minutes(13))
    assert d.run.steps[1].state is StepState.DRAINING
    cmd = d.run.steps[1].command_id
    # pass 5: drained: terminate OTHER with decrement
    d = advance(d.run, at([OTHER, SPARE, S3], 2, 3, 3, **{cmd: DRAINED}), SETTINGS, minutes(15))
    assert [t.decrement for t in effects(d, TerminateInstance)] == [True]
    # pass 6: OTHER left, desired 2: the unit given back; the group's MaxSize restore asked
    d = advance(d.run, at([SPARE, S3], 2, 2, 3, **{cmd: DRAINED}), SETTINGS, minutes(17))
    assert d.run.steps[1].state is StepState.DONE
    # kOps' size is 2 (MaxSize 2): a restore to 3 leaves the group one above it for good
    assert caps(d) == [(NODES, None, 2)], (d.run.groups[0], d.run.steps[1].note)


def test_a_floor_read_before_a_clamp_the_run_missed_is_dropped_when_desired_capacity_reads_below_it() -> None:
    """Own size 2 (MinSize 1, MaxSize 2), step 0 surging (desired 3, MaxSize raised to 3). kOps resizes +2 (MinSize
    4, MaxSize 5: desired 4, own size 4): the pass reads it, the floor 4 recorded. Before the next pass kOps writes
    twice: -3 (MinSize 1, MaxSize 2: Auto Scaling clamps desired capacity to 2, own size 2, the spares scaled in),
    then a spec edit with room (MaxSize 5). The pass reads MinSize 1, desired 2, MaxSize 5: the clamp is only
    visible in desired capacity, 2 below the floor 4, which Auto Scaling never lets desired capacity go under while
    MinSize holds it. The step raises again (3) and its terminate should decrement back to the group's own 2; the
    stale floor 4 makes it go without decrement and the unit absorbed: the group ends at 3, one above its size."""
    r = two_steps(1, 2, 2, StepState.SURGING, 1)
    r.steps[0].waiting_since["spare_launch"] = T0
    # pass 1: kOps +2 read; Auto Scaling launched two instances, not Ready yet
    d = advance(r, at([OLD, OTHER, SPARE, NEW], 4, 4, 5, ready=[OLD, OTHER]), SETTINGS, minutes(1))
    assert d.run.groups[0].min_size == 4
    # pass 2: kOps -3 then a spec edit (MaxSize 5), both between passes: desired 2, the spares gone
    d = advance(d.run, at([OLD, OTHER], 1, 2, 5), SETTINGS, minutes(3))
    assert caps(d) == [(NODES, 3, None)]  # the surge raised again
    # pass 3: the new spare Ready: drain OLD
    d = advance(d.run, at([OLD, OTHER, S3], 1, 3, 5), SETTINGS, minutes(5))
    assert d.run.steps[0].state is StepState.DRAINING
    cmd = d.run.steps[0].command_id
    # pass 4: drained: the terminate should give the unit back (3 - 1 = 2 >= MinSize 1, own size 2)
    d = advance(d.run, at([OLD, OTHER, S3], 1, 3, 5, **{cmd: DRAINED}), SETTINGS, minutes(7))
    assert [t.decrement for t in effects(d, TerminateInstance)] == [True], d.run.groups[0]


def test_two_units_given_back_together_keep_the_one_a_floor_read_made_the_groups_own() -> None:
    """Own size 2, ``max_surge`` 2: desired 4 (two units). kOps raised MinSize to 3 under them (own size 3, the floor
    recorded) and lowered it to 1 again; the run paused. Both steps give their spares back in one pass (no node:
    terminated with decrement at once). ``taken_back`` compares each with ``original_desired + raised - 1`` = 3 while
    ``raised`` is still 2, so both go with decrement: 4 -> 2, one below the group's own 3 that the floor says.
    Expected: one decrement (desired 3); the other unit the group's own (absorbed, its spare kept)."""
    first = {"surge_instance_id": SPARE}
    second = {"surge_instance_id": S3}
    r = two_undoing(first, second, raised=2)
    r.groups[0].min_size = 3  # read under the units: ``track_floor``
    w = at([OLD, OTHER, SPARE, S3], 1, 4, 4, ready=[OLD, OTHER])  # the spares have no node
    d = advance(r, w, SETTINGS, T0 + timedelta(minutes=1))
    decrements = [t.instance_id for t in effects(d, TerminateInstance) if t.decrement]
    assert len(decrements) <= 1, (decrements, d.run.groups[0])


def test_two_drained_steps_do_not_both_decrement_past_the_floor() -> None:
    """As above, the run going on: own size 2, two units (desired 4), the floor 3 recorded under them and MinSize
    lowered to 1 since. Both steps drained in one pass: ``decrementable`` compares each with desired capacity as
    read (4 - 1 >= 3), not with what the other's decrement leaves, so both terminate with decrement: 4 -> 2, one
    below the floor. Expected: one with decrement, the other without (its unit the group's own). With
    MinSize still 3 the second decrement is refused by Auto Scaling (before be244c3 as well)."""
    r = two_steps(1, 2, 2, StepState.DRAINING, 2, max_surge=2, surge_instance_id=SPARE, command_id="refresh-r1-0")
    second_draining(r)
    r.groups[0].min_size = 3  # read under the units: ``track_floor``
    w = at([OLD, OTHER, SPARE, S3], 1, 4, 4, **{"refresh-r1-0": DRAINED, "refresh-r1-1": DRAINED})
    d = advance(r, w, SETTINGS, T0 + timedelta(minutes=1))
    terminations = sorted((t.instance_id, t.decrement) for t in effects(d, TerminateInstance))
    assert [i for i, _ in terminations] == [OLD, OTHER]
    assert sorted(decrement for _, decrement in terminations) == [False, True], (terminations, d.run.groups[0])


# --- cases checked and found sound (each fails without the recorded floor, unless said) ---------------------------


def test_undo_keeps_the_spare_of_a_unit_a_floor_read_made_the_groups_own() -> None:
    """Own size 2, one unit (desired 3); kOps raised MinSize to 3 (own size 3, recorded) and lowered it to 1; the run
    paused. ``taken_back`` compares with the floor: the unit is the group's own, absorbed, its spare kept; nothing
    terminated nor lowered (without the floor: the spare drained and terminated with decrement, the group at 2)."""
    r = run_one(StepState.UNDOING, surge_instance_id=SPARE)
    r.groups[0].min_size = 3
    d = advance(r, at([OLD, OTHER, SPARE], 1, 3, 3), SETTINGS, minutes(1))
    assert not effects(d, TerminateInstance) and not caps(d) and not effects(d, SendCommand)
    group, step = d.run.groups[0], d.run.steps[0]
    assert (group.original_desired, group.raised) == (3, 0)
    assert step.state is StepState.UNDONE and "group's own" in step.note


def test_a_reclaimed_old_instance_under_a_floor_read_absorbs_the_unit_instead_of_lowering() -> None:
    """Own size 2, one unit (desired 3); MinSize 3 read under it, 1 now. Spot reclaimed OLD during its drain, Auto
    Scaling launched its replacement (desired 3 kept). ``left_group`` / ``give_back_unit``: the unit is the group's
    own, the step done, nothing lowered or given back (without the floor: Auto Scaling's replacement given back, 2)."""
    r = run_one(StepState.DRAINING, surge_instance_id=SPARE, command_id="refresh-r1-0")
    r.groups[0].min_size = 3
    running = {"status": "running", "command": {"deadline": minutes(2).isoformat()}}
    d = advance(r, at([OTHER, SPARE, NEW], 1, 3, 3, **{"refresh-r1-0": running}), SETTINGS, minutes(1))
    assert not effects(d, TerminateInstance) and not caps(d)
    group, step = d.run.groups[0], d.run.steps[0]
    assert step.state is StepState.DONE and "own" in step.note
    assert (group.original_desired, group.raised) == (3, 0)


def test_a_floor_over_one_of_two_units_keeps_one_and_gives_the_other_back() -> None:
    """Own size 2, ``max_surge`` 2 (desired 4); kOps raised MinSize to 3 (covering one unit: own size 3) and lowered
    it to 1. Step 0 terminates first, with decrement (4 -> 3); step 1 then goes without (3 - 1 < 3) and its unit is
    absorbed: the group ends at 3 (without the floor: both decremented, 2)."""
    r = two_steps(1, 2, 2, StepState.TERMINATING, 2, max_surge=2, surge_instance_id=SPARE, command_id="refresh-r1-0")
    second_draining(r)
    r.groups[0].min_size = 3
    running = {"status": "running", "command": {"deadline": minutes(20).isoformat()}}
    # step 0's OLD left with its decrement (desired 3); step 1 still draining
    d = advance(r, at([OTHER, SPARE, S3], 1, 3, 4, **{"refresh-r1-1": running}), SETTINGS, minutes(1))
    assert d.run.steps[0].state is StepState.DONE and d.run.groups[0].raised == 1
    d = advance(d.run, at([OTHER, SPARE, S3], 1, 3, 4, **{"refresh-r1-1": DRAINED}), SETTINGS, minutes(3))
    assert [(t.instance_id, t.decrement) for t in effects(d, TerminateInstance)] == [(OTHER, False)]
    d = advance(d.run, at([SPARE, S3, NEW], 1, 3, 4, **{"refresh-r1-1": DRAINED}), SETTINGS, minutes(5))
    group = d.run.groups[0]
    assert (group.original_desired, group.raised) == (3, 0)
    assert caps(d) == [(NODES, None, 3)]  # MaxSize back to the group's own size, not the original 2
    assert d.run.steps[1].state is StepState.DONE


def test_a_min_size_raised_under_the_unit_without_covering_it_leaves_it_to_give_back() -> None:
    """Own size 2, one unit (desired 3): MinSize raised to 2 (``original_desired + raised - 1``, not covering the
    unit), then to 1 again. The floor 2 is recorded; the terminate still goes with decrement (3 - 1 >= 2) and the
    unit is given back: the group ends at 2. A guard against over-applying the floor (passes without it too)."""
    r = run_one(StepState.TERMINATING, surge_instance_id=SPARE)
    d = advance(r, at([OLD, OTHER, SPARE], 2, 3, 3), SETTINGS, minutes(5))
    assert d.run.groups[0].min_size == 2
    assert [t.decrement for t in effects(d, TerminateInstance)] == [True]
    d = advance(d.run, at([OTHER, SPARE], 1, 2, 3), SETTINGS, minutes(10))
    group = d.run.groups[0]
    assert d.run.steps[0].state is StepState.DONE and (group.original_desired, group.raised) == (2, 0)
    assert caps(d) == [(NODES, None, 2)]
