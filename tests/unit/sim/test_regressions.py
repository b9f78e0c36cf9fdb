"""Seeds the simulation found product bugs with, kept as regression cases (issue 12: "each finding is fixed, with its
seed kept as a regression case"). Each names the bug and must hold on the fixed product.

- Seeds 6 and 7 of the ``lock_not_atomic`` mutant's profile, **without** the patch (six outages and 24 concurrency
  windows a day, 12 nodes, 1 day): a donor group raised for two failed groups in turn (``nodes-us-east-1c`` for
  ``nodes-us-east-1a`` then for ``nodes-us-east-1b``) recorded the first raise as its own size in the second ledger.
  When the first compensation was given back and cleared, the replenisher's reconcile with reality read the
  donor's drop as a kOps reset (it "holds 0 of the 1 it carries"), stopped counting the second group's instance,
  and the second give-back restored MaxSize to the first raise: the donor ended at 5/5 instead of 4/4 (invariant 4,
  "sizes end where they were"). Fixed in ``lambdas.replenisher.decide.compensate.own_sizes`` (and
  ``reality.reconcile_donors`` rebasing on the donor's own size).
- Seed 1280 of ``make soak`` (12 nodes, 1 day), shrunk to two faults: a manual refresh of ``nodes-us-east-1a`` and
  Auto Scaling throttling 30 % of calls for 4 minutes. The pass that ended the run saved it ``succeeded`` with MaxSize
  "restored" and then asked UpdateAutoScalingGroup, which was throttled: nothing ever asked again, and the group
  ended at desired 4 / MaxSize 5 instead of 4/4 (invariant 4). Fixed in
  ``lambdas.refresher.decide.lifecycle.finish_groups``: the restore is done only once a later pass reads it back.
  The test slides the throttling window over the run's end instead of keeping the shrunk schedule's.
- Seed 1 at 300 nodes x 7 days (on ``31f3072`` to ``6253f3a``): a refresh drain started, then DynamoDB refused every
  call for 4.6 minutes; the drain's ``CMD#`` end was never written, the item kept reading ``running`` and the
  refresher, past the drain's deadline, timed the step out and uncordoned the node. The checker's "5 a
  drained node is cordoned at once" judged that node as if the drain still ran: a checker bug (``sim.watch`` now
  checks the cordon only until the drain's end, and "5 a drain stops at its deadline" the side after it). Such a
  window also made the agent's step retries (``retry.Retry``) sleep real time (``time.sleep``, unseeded jitter):
  they now wait on ``sim.agent_worker.RetryClock``.
- Two checker bugs, 2026-12-04 (12 nodes, 1 day, without the patches): seed 5024 of the ``refused_terminate_given_back``
  profile, two AZs of three out at once and the third raised to its donor cap (2 x 4): "8 every shortfall covered"
  owed a cover no donor had room for (``Bounds.donor_max_size_factor``, ``tests/unit/sim/test_shortfall_bound.py``);
  seed 5075 of the ``lock_not_atomic`` profile, an operator's ``kubectl uncordon`` of a node a refresh drained after
  they had cordoned it: "5 a drained node is cordoned at once" counted their uncordon against the drain
  (``World.operator_uncordoned``).
- Seed 30013 (30 nodes x 2 days, the default profile; found by a 2026-12-06 soak on ``c7b048d``), shrunk to four
  faults: a Spot burst, Auto Scaling throttled, an agent restart, then DynamoDB refusing 70 % of calls for 9 minutes.
  The new leader's ``MEMBERSHIP`` mark went stale (its writes refused) while two records it had just written stayed
  fresh by their own time; the replenisher's cleanup read every other InService instance as one without a node and
  terminated two masters and a worker with five pods on it, none drained (invariant 3, "no termination before
  drain"). Fixed in ``lambdas.replenisher.decide.cleanup``: no instance is judged by membership unless the mark is
  fresh (``World.membership_confirmed``).
- Seed 54175 of the ``storm`` profile (30 nodes x 2 days; found by a 2026-12-06 storm soak on ``bf4ec0b``), shrunk to
  four faults: an outage of ``us-east-1a``, a Spot burst and a followed rebalance there, then 30 minutes of
  replenisher timeouts at each invocation's 11th port call. Two siblings compensated; once ``us-east-1a`` recovered,
  the give-back recorded each compensating instance ``draining`` with a deadline, but every invocation ended before
  it recorded the second one's drain command. When the ledger's deadline passed, ``drain_done`` counted the drain
  that never existed as over and the replenisher terminated a node with four pods on it, none evicted (invariant 3).
  Fixed in ``lambdas.replenisher.decide.give_back``: a drain never recorded is sent with a deadline from now
  (``tests/unit/lambdas/replenisher/decide/test_give_back_unrecorded.py`` keeps the pure case), and
  ``builder.drain_done`` never counts a command that was not recorded.
- Seed 60002 of the ``storm`` profile (30 nodes x 2 days, the same soak on ``0ebe5f5``), shrunk to three faults: the
  agent's leadership lost for 15 s, a manual refresh of ``us-east-1a``, then DynamoDB refusing every call for 9.8
  minutes. The drain of the old node never started, the run paused past its deadline and gave its surge back; the
  spare's record had aged out of the membership under the stale mark, so ``decide.undo.undoing`` took it for a
  spare without a node and terminated it undrained with four pods on it (invariant 3). Fixed with
  ``World.membership_confirmed`` in the refresher: an absence only a fresh mark confirms
  (``tests/unit/lambdas/refresher/decide/test_undo_unconfirmed.py`` keeps the pure case).
- The same schedule's first three faults with SQS refusing every SendMessage for 15 minutes as the give-back starts
  (2026-12-06 review): the drain was recorded but never sent, and the replenisher terminated the same node with its
  four pods once the deadline passed; hidden by invariant 3, which excused any drain item past its deadline (now a
  give-back's or a surplus master's drain only once started: ``sim.drain_items``). Fixed in
  ``decide.give_back`` (``core.model.drain_never_ran``): such a drain is sent again under a new id with a whole timeout.
- Seed 123033 of the ``storm`` profile (30 nodes x 2 days, a 2026-12-07 review's soak): a refresh counted a Ready node
  cordoned for a Spot warning as capacity and terminated an old instance; the reclaim left the group short
  (invariant 1). Fixed with ``NodeRecord.ending`` / ``serving`` (the agent reports its ``instance-ending`` cordon).
- Storm seeds 150118, 150132 and 150041 (30 nodes x 2 days, the first soak with kOps spec room, spec edits and
  ``max_surge`` 2, 2026-12-07), shrunk: two refresh steps lowering desired capacity together asked the same value
  and each read it back as the other's (fixed, ``undo.lowering_target``); a spec edit writing the very MaxSize a
  compensation raised the group to (the product cannot tell it from its own: the checker accepts the restore); a
  spec edit writing a MaxSize above a compensation's raise, which the give-back restored down all the same (fixed,
  ``give_back``: only a MaxSize a raise set is restored).
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from datetime import timedelta
from types import FrameType
from typing import Any

import pytest

from core.model import Command
from sim.mutants import MUTANTS
from sim.run import run_seed
from sim.schedules import Fault, Profile
from sim.world import World
from tests.unit.sim.storm_profiles import STORM_BEFORE_HEALTH, STORM_BEFORE_SPECS

# the lock profile as it was when seeds 6 and 7 were found: concurrent windows of any function at calls 1-8 (the
# profile now draws them between the lock takers only, which gives the same seeds other faults)
LOCK_PROFILE_FIRST = replace(MUTANTS["lock_not_atomic"].profile, concurrent_calls=(1, 8), functions=Profile().functions)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [6, 7])
def test_a_donor_shared_by_two_compensations_ends_where_it_was(seed: int) -> None:
    result = run_seed(seed, 12, 1.0, profile=LOCK_PROFILE_FIRST, trace=True)
    assert result.violation is None, result.summary()
    notes = [line for line in result.trace if "size_reset" in line]
    assert not notes, notes[:1]  # no give-back read as a reset (the profile has no kOps reset)


def test_a_throttled_max_size_restore_at_a_runs_end_is_asked_again() -> None:
    """Seed 1280's two faults, with the throttling window slid over the run's end (the run's timing moves whenever
    the refresher's passes change, so one recorded window would soon miss it): 24 windows, half the Auto Scaling
    calls throttled. Before the fix 2 of them ended with MaxSize raised; some must throttle the refresher."""
    refresh = Fault(at=80.863, kind="manual_refresh", duration=0.0, params=(("az", "us-east-1a"),))
    throttled = 0
    for start in range(540, 900, 15):
        throttle = Fault(
            at=float(start),
            kind="api",
            duration=240.0,
            params=(("code", "Throttling"), ("operation", ""), ("probability", 0.5), ("service", "autoscaling")),
        )
        result = run_seed(1280, 12, 0.05, schedule=(refresh, throttle), trace=True)
        assert result.violation is None, f"throttled from {start} s: {result.summary()}"
        throttled += any("refresher error" in line and "UpdateAutoScalingGroup" in line for line in result.trace)
    assert throttled, "no window throttles the refresher any more: move the windows (make soak found the case)"


REFRESH_1A = Fault(at=80.863, kind="manual_refresh", duration=0.0, params=(("az", "us-east-1a"),))


def _dynamodb_down(start: float, end: float) -> Fault:
    """DynamoDB refusing every call from ``start`` to ``end`` (seed 1's window at t=297,379 s, made longer)."""
    params = (
        ("code", "ProvisionedThroughputExceededException"),
        ("operation", ""),
        ("probability", 1.0),
        ("service", "dynamodb"),
    )
    return Fault(at=start, kind="api", duration=end - start, params=params)


def test_a_drain_whose_end_the_table_refused_may_be_uncordoned_after_its_deadline() -> None:
    """Seed 1's case on a 12-node refresh: the first drain (sent at about t=183 s, deadline 10 minutes later) ends
    while DynamoDB refuses every call until past its deadline: its end is never recorded (its message dead-lettered
    by the throttled reads), the refresher times the step out and uncordons the node. Every invariant holds: the
    cordon check ends at the drain's deadline. Windows slid over the drain's start, as the run's timing moves."""
    found = 0
    for start in (184.0, 186.0, 190.0):
        worlds: list[World] = []
        result = run_seed(1280, 12, 0.1, schedule=(REFRESH_1A, _dynamodb_down(start, 790.0)), mutate=worlds.append)
        assert result.violation is None, f"DynamoDB down from {start} s: {result.summary()}"
        stuck = [
            item
            for item in worlds[0].view.table_prefix("CMD#")
            if item.get("kind") == "drain" and item.get("status") == "running"
        ]
        schedulable = {n.instance_id for n in worlds[0].view.node_states() if not n.unschedulable}
        uncordoned = schedulable & {str(item["instance_id"]) for item in stuck}
        found += bool(uncordoned)
    assert found, "no window left a drain's end unrecorded and its node uncordoned: move the windows"


def test_the_agents_step_retries_never_sleep() -> None:
    """Throttled ``CMD#`` reads and terminal writes are retried (``retry.Retry``) on the simulation's clock: no
    ``time.sleep`` is called during the run (before, each throttled step slept up to ``COMMAND_RETRY_SECONDS`` of
    wall time, jittered by the unseeded ``random``), and the run is the same run again."""
    slept: list[str] = []

    class Slept(BaseException):
        pass

    def watch(frame: FrameType, event: str, arg: Any) -> None:
        if event == "c_call" and arg is time.sleep:
            slept.append(frame.f_code.co_qualname)
            raise Slept(frame.f_code.co_qualname)

    schedule = (REFRESH_1A, _dynamodb_down(200.0, 804.0))  # over a drain's terminal write (a faster start moved it)
    worlds: list[World] = []
    sys.setprofile(watch)
    try:
        first = run_seed(1280, 12, 0.1, schedule=schedule, mutate=worlds.append)
    except Slept:
        pass
    finally:
        sys.setprofile(None)
    assert not slept, f"slept in {slept[0]}"
    assert worlds[0].agent.worker.counters.snapshot().get("retry_report", 0) > 0  # the terminal write was retried
    assert run_seed(1280, 12, 0.1, schedule=schedule).digest == first.digest


def test_a_drain_evicting_past_its_deadline_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The side "cordoned until its end" leaves open: a PodDisruptionBudget holds the first drains past their
    deadlines; a drain that ignored its deadline (the mutation: the agent caps it a day away) evicts once the budget
    allows, after the deadline, and "5 a drain stops at its deadline" reports it. Unmutated, every invariant holds."""
    schedule = (REFRESH_1A, Fault(at=60.0, kind="pdb_block", duration=1500.0))
    held = run_seed(1280, 12, 0.1, schedule=schedule)
    assert held.violation is None, held.summary()

    def no_deadline(command: Command, now: Any, max_seconds: float) -> Command:
        return command.model_copy(update={"deadline": now + timedelta(days=1)})

    monkeypatch.setattr("sim.agent_slots.capped", no_deadline)
    broken = run_seed(1280, 12, 0.1, schedule=schedule)
    assert broken.violation is not None
    assert broken.violation.invariant == "5 a drain stops at its deadline"


@pytest.mark.slow
@pytest.mark.parametrize(("seed", "profile"), [(5024, "refused_terminate_given_back"), (5075, "lock_not_atomic")])
def test_the_checker_owes_no_cover_past_the_cap_and_counts_no_operator_uncordon(seed: int, profile: str) -> None:
    result = run_seed(seed, 12, 1.0, profile=MUTANTS[profile].profile)
    assert result.violation is None, result.summary()


def test_a_stale_membership_mark_terminates_nothing_as_unregistered() -> None:
    """Seed 30013's week: every invariant holds, and the ticks that met the stale mark said so (if the run's timing
    moves so that none does, pick a seed of the soak that does: ``tests/unit/lambdas/replenisher/decide/
    test_cleanup.py`` keeps the pure case)."""
    result = run_seed(30013, 30, 2.0, trace=True)
    assert result.violation is None, result.summary()
    assert any("no fresh MEMBERSHIP mark" in line for line in result.trace)


def test_a_give_back_drain_never_recorded_is_not_counted_over_at_its_deadline() -> None:
    """Seed 54175's shrunk storm schedule: every invariant holds (it broke invariant 3 before the fix)."""
    schedule = (
        Fault(50256.0, "outage", 13122.0, (("az", "us-east-1a"),)),
        Fault(58500.0, "spot_burst", 480.0, (("az", "us-east-1a"), ("count", 2))),
        Fault(60840.0, "rebalance", 2304.0, (("az", "us-east-1a"), ("follow", 1))),
        Fault(63288.0, "crash", 1782.0, (("call", 11), ("function", "replenisher"), ("how", "timeout"))),
    )
    result = run_seed(54175, 30, 2.0, schedule=schedule)
    assert result.outcomes.get("replenisher:timeout", 0) > 0, result.summary()
    assert result.violation is None, result.summary()


def test_a_spare_missing_from_an_unconfirmed_membership_is_drained_before_it_is_given_back() -> None:
    """Seed 60002's shrunk storm schedule: every invariant holds (it broke invariant 3 before the fix)."""
    schedule = (
        Fault(33084.0, "agent_restart", params=(("leader", 1),)),
        Fault(43812.0, "manual_refresh", params=(("az", "us-east-1a"),)),
        Fault(
            44100.0,
            "api",
            588.0,
            (
                ("code", "ProvisionedThroughputExceededException"),
                ("operation", ""),
                ("probability", 1.0),
                ("service", "dynamodb"),
            ),
        ),
    )
    result = run_seed(60002, 30, 2.0, schedule=schedule)
    assert result.violation is None, result.summary()


def test_a_give_back_drain_that_never_ran_is_not_counted_over_at_its_deadline() -> None:
    """Seed 54175's first three faults, then SQS refusing every SendMessage for 15 minutes as the give-back starts
    (no Lambda crash): the give-back's drain was recorded, its message never sent (``queued``, then ended unstarted
    by the sweeper), and once its deadline passed the replenisher terminated a node with four pods on it, none
    evicted. Invariant 3 then excused any drain item past its deadline; it now excuses a give-back's or a surplus
    master's drain only once the agent started it (``sim.drain_items``: nothing ends those instances but the
    terminate), so this schedule breaks it on the old product."""
    sqs = (("service", "sqs"), ("operation", "SendMessage"), ("code", "ThrottlingException"))
    schedule = (
        Fault(50256.0, "outage", 13122.0, (("az", "us-east-1a"),)),
        Fault(58500.0, "spot_burst", 480.0, (("az", "us-east-1a"), ("count", 2))),
        Fault(60840.0, "rebalance", 2304.0, (("az", "us-east-1a"), ("follow", 1))),
        Fault(64200.0, "api", 900.0, sqs),
    )
    result = run_seed(54175, 30, 2.0, schedule=schedule)
    assert result.violation is None, result.summary()


def test_an_undo_drain_that_never_ran_is_not_counted_over_at_its_deadline() -> None:
    """Seed 60002's shrunk schedule, then SQS refusing every SendMessage for 15 minutes as the run gives its surge
    back (2026-12-06 review of 4ad1fc4): the spare's undo drain was recorded, never sent, expired ``queued`` by the
    sweeper, and the refresher terminated the spare with four pods on it, none evicted. Invariant 3 excused it (any
    drain past its deadline); it now excuses the refresher's undo drains only once started (``sim.drain_items``), so
    this schedule breaks it on the old product. Fixed in ``decide.undo.undo_draining``
    (``core.model.drain_never_ran``): a new drain under a new id."""
    sqs = (("service", "sqs"), ("operation", "SendMessage"), ("code", "ThrottlingException"))
    ddb = (
        ("code", "ProvisionedThroughputExceededException"),
        ("operation", ""),
        ("probability", 1.0),
        ("service", "dynamodb"),
    )
    schedule = (
        Fault(33084.0, "agent_restart", params=(("leader", 1),)),
        Fault(43812.0, "manual_refresh", params=(("az", "us-east-1a"),)),
        Fault(44100.0, "api", 588.0, ddb),
        Fault(44688.0, "api", 900.0, sqs),
    )
    result = run_seed(60002, 30, 2.0, schedule=schedule)
    assert result.violation is None, result.summary()


def test_a_node_cordoned_by_a_spot_warning_is_not_counted_as_capacity_by_a_refresh() -> None:
    """Seed 123033 of the ``storm`` profile (30 nodes x 2 days; found by a 2026-12-07 review's soak, the same on
    ``a2ec2dc``): during a manual refresh of ``nodes-us-east-1a``, step 0's spare (a node by then) is reclaimed; Auto
    Scaling's replacement gets a Spot interruption warning before it launches, the agent cordons and drains it as it
    registers, and it turns Ready still cordoned. Step 1's "Ready nodes besides those being replaced"
    (``Context.ready_besides``) counted that doomed node, terminated its old instance, and the reclaim two minutes
    later left the group under its Ready nodes at the start (invariant 1). Counting only schedulable Ready nodes would
    stall every refresh while an operator keeps any node cordoned; fixed by the agent reporting a node cordoned with
    its ``instance-ending`` annotation (``NodeRecord.ending``) and the refresher counting only ``NodeRecord.serving``
    nodes."""
    result = run_seed(123033, 30, 2.0, profile=STORM_BEFORE_SPECS)
    assert result.violation is None, result.summary()


OUTAGE_1C_REFRESH = (
    Fault(66849.302, "manual_refresh", params=(("az", "us-east-1c"), ("max_surge", 2))),
    Fault(66863.024, "outage", 2684.548, (("az", "us-east-1c"),)),
)


def test_two_surge_units_that_launched_nothing_are_both_given_back() -> None:
    """Storm seed 150118, shrunk: a manual refresh of ``nodes-us-east-1c`` with ``max_surge`` 2 as its AZ lost its
    capacity. Step 0 was replaced; steps 1 and 2 surged to 12 and launched nothing; past the launch deadline the run
    paused and both gave their units back by lowering desired capacity, each asking 11 (``original_desired + raised
    - 1``), so the group went to 11, not 10, and each step read 11 as the other's lowering: both waited for good
    ("8 no refresh wait past its deadline", step 1 in ``spare_launch`` for 2,438 s). Fixed in
    ``lambdas.refresher.decide.undo`` (``lowering_target``, ``lowered_by_another``)."""
    result = run_seed(150118, 30, 1.0, schedule=OUTAGE_1C_REFRESH)
    assert result.violation is None, result.summary()


def _covered_by_1c(outage: Fault, burst: Fault, above: int, at: float) -> tuple[Fault, ...]:
    spec = Fault(at, "kops_spec", params=(("above", above), ("az", "us-east-1c"), ("below", 0)))
    return (outage, burst, spec)


def test_a_spec_edit_to_the_max_size_a_compensation_raised_to_is_not_counted_against_its_restore() -> None:
    """Storm seed 150132, shrunk: an outage and a Spot burst in ``us-east-1a``; the replenisher raised
    ``nodes-us-east-1c`` to desired 11 / MaxSize 11, then kOps wrote the group's new spec, MaxSize 11: the group's
    sizes did not change, and the give-back restored MaxSize 10, the only original the product can know. A checker
    bug: the end check now also accepts the MaxSize before a spec edit that wrote a value a raise of ours held
    (``World.restore_excused``, ``sim.actors._kops_spec``)."""
    outage = Fault(13585.951, "outage", 9335.768, (("az", "us-east-1a"),))
    burst = Fault(16372.693, "spot_burst", 330.404, (("az", "us-east-1a"), ("count", 2)))
    result = run_seed(150132, 30, 0.5, schedule=_covered_by_1c(outage, burst, 1, 19271.895))
    assert result.violation is None, result.summary()


def test_a_spec_edit_above_a_compensations_raise_is_not_restored_down() -> None:
    """Storm seed 150041, shrunk: an outage and a Spot burst in ``us-east-1b``; the replenisher raised
    ``nodes-us-east-1c`` to 11/11, kOps then wrote its new spec, MaxSize 12 (above anything the compensation set),
    and the give-back restored MaxSize to 10 (``give_back``, phase B: any MaxSize above the recorded original was
    restored): the group ended at 10/10, its spec 10/12 ("4 sizes end where they were"). Fixed: only a MaxSize at
    most the highest raise on the donor is restored (``give_back.hand_over_raise`` keeps that known when an earlier
    ledger clears first)."""
    outage = Fault(31504.567, "outage", 11542.955, (("az", "us-east-1b"),))
    burst = Fault(31637.292, "spot_burst", 341.682, (("az", "us-east-1b"), ("count", 2)))
    result = run_seed(150041, 30, 1.0, schedule=_covered_by_1c(outage, burst, 2, 39823.728))
    assert result.violation is None, result.summary()


def test_a_surge_under_a_max_size_kops_raised_keeps_it() -> None:
    """Storm seed 150732, shrunk: a manual refresh of ``nodes-us-east-1b`` (10 nodes, MaxSize 10) with ``max_surge``
    2; its canary surge raised MaxSize to 11, then kOps wrote the group's new spec, MaxSize 12. The next surge (desired
    12) asked MaxSize 12 as well, the run took 12 for its own raise and restored 10 at its end: the group ended at
    10/10, its spec 10/12 ("4 sizes end where they were"). Seed 150835 lowered a spec's MaxSize 12 to a surge's 11
    the same way. Fixed in ``Context.capacity``: a MaxSize is asked only to raise it above the one read."""
    schedule = (
        Fault(137866.121, "manual_refresh", params=(("az", "us-east-1b"), ("max_surge", 2))),
        Fault(138152.404, "kops_spec", params=(("above", 2), ("az", "us-east-1b"), ("below", 1))),
    )
    result = run_seed(150732, 30, 2.0, schedule=schedule)
    assert result.violation is None, result.summary()


def test_a_kept_spare_drained_for_its_give_back_is_uncordoned() -> None:
    """Storm seed 152141 (30 nodes x 2 days, one master): a refresh of ``nodes-us-east-1b`` paused on a blocked
    drain; its spare was drained to be given back and its terminate refused (Auto Scaling unavailable), then kOps' new
    spec (MaxSize 10) clamped the surge unit away. The step kept the spare (``undo.taken_back``) but read its drain as
    never sent (a step ``undo_terminating`` reads no command), so no uncordon: the node stayed cordoned ("8 a cordon
    of ours is resolved within a bound"). Fixed in ``undo.taken_back``."""
    result = run_seed(152141, 30, 2.0, profile=STORM_BEFORE_HEALTH, masters=1)
    assert result.violation is None, result.summary()


def test_a_unit_kops_clamped_away_is_the_unlaunched_one() -> None:
    """Storm seed 152378 (30 nodes x 2 days): a ``max_surge`` 2 refresh of ``nodes-us-east-1b`` during an outage
    there; step 1 handed its unit to step 3 (Auto Scaling's replacement, which the outage never launched), step 2's
    drain was blocked and the run paused, then kOps' new spec (MaxSize 11) clamped desired capacity 12 -> 11, taking
    step 3's unlaunched unit. ``undo.taken_back`` judged step 2 first (index order) and counted the clamp as *its*
    unit taken, keeping its spare; step 3, holding the last unit with no spare, waits for a launch that never comes
    (desired capacity equals the live instances): "8 no refresh wait past its deadline". Fixed in ``undo.taken_back``
    (``clamped_from_another``: a unit no live instance backs is the one a clamp takes first)."""
    result = run_seed(152378, 30, 2.0, profile=STORM_BEFORE_HEALTH)
    assert result.violation is None, result.summary()


def test_no_surge_raises_a_max_size_kops_lowered_below_the_runs_original() -> None:
    """Storm seed 152576 (30 nodes x 2 days): a ``max_surge`` 2 refresh of ``nodes-us-east-1b`` (spec MaxSize 11);
    kOps' new spec wrote MaxSize 10 under it, and the next step's surge asked MaxSize 12, the run's restore 11: the
    group ended at 10/11, its spec 10/10 ("4 sizes end where they were"). Fixed in ``worker.start_workers``: no surge
    while MaxSize reads below the run's original; the run pauses."""
    result = run_seed(152576, 30, 2.0, profile=STORM_BEFORE_HEALTH)
    assert result.violation is None, result.summary()
