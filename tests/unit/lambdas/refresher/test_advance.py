"""Advancing a run: when a pass reads the compensation donors (only when it may surge a worker group for the first
time), and two invocations of one run sharing the cluster lock (moto), each as a holder of its own."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import adapters.dynamo.snapshot as snapshot_module
import lambdas.refresher.advance as advance
from adapters.dynamo.lock import LeaseLock
from adapters.dynamo.poller import poll_sk
from core.exceptions import StoreUnavailableError
from core.model import Command, CommandKind
from core.runs import (
    LOCK_OPERATION,
    GroupSurge,
    Run,
    RunOptions,
    RunStatus,
    RunStep,
    StepState,
    lock_holder,
    run_id_of_holder,
)
from lambdas.refresher.decide.context import Decision, Wait, WaitKind
from lambdas.refresher.passes import looked_at_commands, may_start_a_group
from lambdas.refresher.plan import Metric, SaveRun, SendCommand, SetCapacity
from tests.unit.lambdas.refresher.moto_cluster import RUN_ID, Cluster, moto_cluster, pending_run, surging_run

T0 = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)


def run(state: StepState, raised: int = 0, status: RunStatus = RunStatus.RUNNING, role: str = "node") -> Run:
    return Run(
        run_id="r1",
        cluster="c",
        status=status,
        options=RunOptions(),
        created_at=T0,
        updated_at=T0,
        groups=[GroupSurge(name="g", role=role, min_size=1, original_desired=2, original_max=4, raised=raised)],
        steps=[
            RunStep(index=0, group="g", role=role, instance_id="i-00000000000000001", state=state),
            RunStep(index=1, group="g", role=role, instance_id="i-00000000000000002"),
        ],
    )


def test_donors_are_read_only_before_a_groups_first_surge() -> None:
    assert may_start_a_group(run(StepState.PENDING))
    assert may_start_a_group(run(StepState.DONE))  # between two steps, the surge all given back
    assert not may_start_a_group(run(StepState.SURGING, raised=1))  # the group is the run's now
    assert not may_start_a_group(run(StepState.PENDING, status=RunStatus.PAUSING))
    assert not may_start_a_group(run(StepState.PENDING, role="control-plane"))
    # a later group waiting for its turn is not read for: only the current group may start (every pass of a run's
    # first groups read the COMP# ledgers before, 5.7 Queries a node in the smoke benchmark)
    later = run(StepState.SURGING, raised=1)
    later.groups.append(GroupSurge(name="h", role="node", min_size=1, original_desired=2, original_max=4))
    later.steps.append(RunStep(index=2, group="h", role="node", instance_id="i-00000000000000003"))
    assert not may_start_a_group(later)
    later.steps[0].state = later.steps[1].state = StepState.DONE
    later.groups[0].raised = 0
    assert may_start_a_group(later)  # g finished: h is the current group now


# -- two invocations of one run: each its own lock holder (moto) -------------------------------------------------


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    with moto_cluster(monkeypatch) as c:
        yield c


def test_holder_names_carry_the_invocation_and_still_name_the_run() -> None:
    holder = lock_holder(RUN_ID, "req-1")
    assert holder != lock_holder(RUN_ID, "req-2") and run_id_of_holder(holder) == RUN_ID
    assert run_id_of_holder(lock_holder(RUN_ID)) == RUN_ID  # a holder name of before (no invocation)


def test_another_invocations_pass_is_waited_for_never_renewed_nor_released(cluster: Cluster) -> None:
    deps = cluster.new_deps()
    deps.runs.create(surging_run(cluster.instances()[0]))
    first = deps.lock.acquire(lock_holder(RUN_ID, "invocation-a"), LOCK_OPERATION, 180)  # its pass is under way
    out = advance.advance_run(cluster.new_deps(), None, 0.05, "invocation-b")
    assert out["actions"] == [] and "invocation-a" in out["lock"]
    assert cluster.sizes() == (2, 3)  # the second invocation applied nothing
    item = deps.lock.current() or {}
    assert (item["holder"], int(item["fencing"])) == (first.holder, first.fencing)  # still the first one's lease
    deps.lock.renew(first, 180)  # and the first can still renew it (it would raise LockLostError)


def _locked(guard: Any, method: Any, *args: Any, **kwargs: Any) -> Any:
    with guard:
        return method(*args, **kwargs)


def test_two_concurrent_invocations_never_apply_at_once(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    deps = cluster.new_deps()
    deps.runs.create(surging_run(cluster.instances()[0]))
    gather, execute = advance.gather, advance.execute
    both_read = threading.Barrier(2)
    guard = threading.Lock()
    applying: list[str] = []  # invocations applying a decision now
    overlaps: list[tuple[str, ...]] = []
    applied: list[str] = []

    first_read: set[str] = set()

    def read_together(*args: Any) -> Any:
        world = gather(*args)
        if threading.current_thread().name not in first_read:
            first_read.add(threading.current_thread().name)
            with contextlib.suppress(threading.BrokenBarrierError):
                both_read.wait(timeout=5)  # the two first passes decide on the same read
        return world

    def watched(actions: Any, effects: Any, now: Any) -> Any:
        me = threading.current_thread().name
        done = []
        if effects.lease is None and effects.take is not None:
            # the save that opens the decision takes the lock in its own transaction: until it has, nothing is
            # applied (it raises LockHeldError when the lock changed hands since the pass read it)
            done = execute(actions[:1], effects, now)
            actions, effects = actions[1:], dataclasses.replace(effects, lease=effects.taken[-1], take=None)
        with guard:
            applying.append(me)
            applied.append(me)
            if len(applying) > 1:
                overlaps.append(tuple(applying))
        try:
            time.sleep(0.05)  # applying takes a while: plenty of time for the other invocation to step in
            return done + execute(actions, effects, now)
        finally:
            with guard:
                applying.remove(me)

    monkeypatch.setattr(advance, "gather", read_together)
    monkeypatch.setattr(advance, "execute", watched)
    monkeypatch.setattr(advance, "MAX_PASSES", 40)
    atomic = threading.RLock()  # in-process moto evaluates a condition and writes without a lock: DynamoDB does not
    for name in ("acquire", "renew", "release"):
        method = getattr(LeaseLock, name)
        monkeypatch.setattr(LeaseLock, name, lambda *a, _m=method, **k: _locked(atomic, _m, *a, **k))
    outs: dict[str, dict[str, Any]] = {}

    def invoke(name: str) -> None:
        outs[name] = advance.advance_run(cluster.new_deps(), None, 0.3, name)

    threads = [threading.Thread(target=invoke, args=(n,), name=n) for n in ("tick", "drain-result")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert set(outs) == {"tick", "drain-result"}
    assert applied and overlaps == []  # never two decisions applied under "the" lock at once
    assert not (deps.lock.current() or {}).get("holder")  # and both gave it up at the end
    assert cluster.sizes() == (3, 3)  # the surge applied once, as recorded


def test_a_polling_pass_that_decides_nothing_writes_nothing_not_even_the_lock(cluster: Cluster) -> None:
    deps = cluster.new_deps()
    deps.runs.create(surging_run(cluster.instances()[0]))
    advance.advance_run(deps, None, 0.0, "first")  # raises the group (again), and ends
    advance.advance_run(deps, None, 0.0, "second")  # records what the step waits for
    polling = _on_its_sleeps(cluster.new_deps())
    counted: Counter[str] = Counter()
    polling.store.table.meta.client.meta.events.register("before-call", lambda model, **_: counted.update([model.name]))
    out = advance.advance_run(polling, None, 1.0, "poller")  # the spare never registers: poll until the budget
    assert out["actions"] == [] and counted["Query"] >= 2  # several passes
    assert not {"UpdateItem", "TransactWriteItems"} & set(counted), counted  # the lock neither taken nor given up
    lock = deps.lock.current() or {}
    assert lock.get("holder") is None and lock["fencing"] == 1  # as the first invocation left it
    # once per invocation: it claims the polling (POLL#) and gives it up; the run's last state is its last pass's
    # read (it applied nothing), so no GetItem at the end
    assert (counted["PutItem"], counted["DeleteItem"], counted["GetItem"]) == (1, 1, 0), counted


def _on_its_sleeps(deps: Any, also: Callable[[float], None] | None = None) -> Any:
    """``deps`` whose budget only its sleeps spend (each also given to ``also``), not moto's answer times: a loaded
    machine once spent a whole 1 s budget in the first pass, short of the wait the test is about."""
    slept = [0.0]
    deps.monotonic = lambda: slept[0]
    deps.sleep = lambda seconds: (slept.__setitem__(0, slept[0] + seconds), also and also(seconds))
    return deps


def _waiting_run(cluster: Cluster) -> Any:
    deps = cluster.new_deps()
    deps.runs.create(surging_run(cluster.instances()[0]))
    advance.advance_run(deps, None, 0.0, "first")  # raises the group (again), and ends
    advance.advance_run(deps, None, 0.0, "second")  # from now on the step waits for its spare
    return deps


def test_an_invocation_leaves_the_polling_to_one_whose_budget_ends_later(cluster: Cluster) -> None:
    deps = _waiting_run(cluster)
    until = T0.timestamp() + 3600
    deps.store.put(poll_sk(RUN_ID), {"invocation": "the-tick", "until": until})
    counted: Counter[str] = Counter()
    late = _on_its_sleeps(cluster.new_deps())
    late.store.table.meta.client.meta.events.register("before-call", lambda model, **_: counted.update([model.name]))
    out = advance.advance_run(late, None, 0.3, "a-launch-event")
    assert out["polling"] == "invocation the-tick polls the run" and counted["Query"] == 2  # one pass (2 reads)
    assert deps.store.get(poll_sk(RUN_ID)) == {**deps.store.get(poll_sk(RUN_ID)), "invocation": "the-tick"}


def test_a_wait_an_event_ends_leaves_the_polling_to_any_live_poller(cluster: Cluster) -> None:
    """The spare's node to register and be Ready: the agent's "Node Ready" ends that wait, so one slow poller is
    enough; a later invocation does its own pass and leaves the polling to it, whatever their budgets."""
    deps = _waiting_run(cluster)
    deps.store.put(poll_sk(RUN_ID), {"invocation": "older", "until": T0.timestamp() + 0.1})
    out = advance.advance_run(_on_its_sleeps(cluster.new_deps()), None, 1.0, "newer")
    assert out["polling"] == "invocation older polls the run"
    assert (deps.store.get(poll_sk(RUN_ID)) or {})["invocation"] == "older"


@pytest.mark.parametrize("others_until", [0.0], ids=["expired"])
def test_an_invocation_whose_budget_ends_later_takes_the_polling_over_and_gives_it_up(
    cluster: Cluster, others_until: float
) -> None:
    deps = _waiting_run(cluster)
    deps.store.put(poll_sk(RUN_ID), {"invocation": "older", "until": T0.timestamp() + others_until})
    seen: list[Any] = []
    # what the item says while it polls
    poller = _on_its_sleeps(cluster.new_deps(), lambda _: seen.append(deps.store.get(poll_sk(RUN_ID))))
    out = advance.advance_run(poller, None, 1.0, "newer")
    assert "polling" not in out and seen and all(item["invocation"] == "newer" for item in seen)
    assert deps.store.get(poll_sk(RUN_ID)) is None  # given up when it returned


def test_a_poller_taken_over_stops_polling_and_leaves_the_item_to_the_new_one(cluster: Cluster) -> None:
    deps = _waiting_run(cluster)
    polls: list[int] = []

    def taken_over(seconds: float) -> None:
        polls.append(1)
        deps.store.put(poll_sk(RUN_ID), {"invocation": "newer", "until": T0.timestamp() + 3600})

    first = _on_its_sleeps(cluster.new_deps(), taken_over)
    out = advance.advance_run(first, None, 5.0, "older")
    assert out["polling"] == "invocation newer polls the run now" and len(polls) == 1
    assert (deps.store.get(poll_sk(RUN_ID)) or {})["invocation"] == "newer"


def test_a_poller_that_cannot_give_the_polling_up_still_returns(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    deps = _waiting_run(cluster)

    def unavailable(*args: Any) -> None:
        raise StoreUnavailableError("throttled")

    monkeypatch.setattr(advance.poller_store, "give_up", unavailable)
    poller = _on_its_sleeps(cluster.new_deps())
    out = advance.advance_run(poller, None, 1.0, "poller")
    assert out["status"] == "advanced"  # the item expires with its budget
    assert (deps.store.get(poll_sk(RUN_ID)) or {})["invocation"] == "poller"


# -- what a pass reads and writes: the calls per replaced node (bench.refresher) --------------------------------


def test_only_the_commands_a_decision_looks_at_are_read() -> None:
    r = run(StepState.DRAINING)
    r.steps[0].command_id = "refresh-r1-0"
    r.steps[1].state, r.steps[1].command_id = StepState.TERMINATING, "refresh-r1-1"  # drained: not looked at
    r.steps.append(
        RunStep(
            index=2,
            group="g",
            role="node",
            instance_id="i-00000000000000003",
            state=StepState.UNDO_DRAINING,
            command_id="refresh-r1-2",
            undo_command_id="refresh-r1-2-undo",
        )
    )
    assert looked_at_commands(r) == ["refresh-r1-0", "refresh-r1-2-undo"]
    r.steps[0].state = StepState.SURGING
    assert looked_at_commands(r) == ["refresh-r1-2-undo"]


def _drain(index: int = 0) -> SendCommand:
    return SendCommand(
        Command(
            command_id=f"refresh-r1-{index}",
            cluster="c",
            kind=CommandKind.DRAIN,
            instance_id="i-00000000000000001",
            node_name="n1",
            reason="refresh r1 step 0",
            deadline=T0,
        )
    )


def test_only_a_pass_that_sent_drains_alone_skips_the_read_back() -> None:
    r = run(StepState.DRAINING)
    assert advance.outcome_by_event(Decision(r, [SaveRun(r), _drain()]))
    assert advance.outcome_by_event(Decision(r, [SaveRun(r), _drain()], [Wait(WaitKind.NODE_READY, "spare")]))
    # an effect the next pass reads back (the surge), a wait polled for, a state the next pass acts on, a run
    # that stops, an uncordon: read again
    assert not advance.outcome_by_event(Decision(r, [SaveRun(r), _drain(), SetCapacity("g", desired=3)]))
    assert not advance.outcome_by_event(Decision(r, [SaveRun(r), _drain()], [Wait(WaitKind.TERMINATION, "i-1")]))
    undoing = run(StepState.DRAINING)
    undoing.steps[1].state = StepState.UNDOING
    assert not advance.outcome_by_event(Decision(undoing, [SaveRun(undoing), _drain()]))
    pausing = run(StepState.DRAINING, status=RunStatus.PAUSING)
    assert not advance.outcome_by_event(Decision(pausing, [SaveRun(pausing), _drain()]))
    uncordon = _drain()
    uncordon = SendCommand(uncordon.command.model_copy(update={"kind": CommandKind.UNCORDON}))
    assert not advance.outcome_by_event(Decision(r, [SaveRun(r), uncordon]))
    assert not advance.outcome_by_event(Decision(r, [SaveRun(r)]))


def test_a_pass_that_only_surged_skips_the_read_back_too() -> None:
    """The surge's launch and its spare's "Node Ready" are events (and the launch wait's deadline was recorded at the
    surge, for the tick): a raise for a step that surged in this decision ends the invocation, with drains too."""
    r = run(StepState.SURGING, raised=1)
    r.steps[0].intent_at = r.updated_at
    assert advance.outcome_by_event(Decision(r, [SaveRun(r), SetCapacity("g", desired=3)]))
    assert advance.outcome_by_event(Decision(r, [SaveRun(r), SetCapacity("g", desired=3, max_size=3), _drain(1)]))
    # not what the surge adds up to (a give-back), another group, or a surge decided before: read again
    assert not advance.outcome_by_event(Decision(r, [SaveRun(r), SetCapacity("g", desired=2)]))
    assert not advance.outcome_by_event(Decision(r, [SaveRun(r), SetCapacity("h", desired=3)]))
    assert not advance.outcome_by_event(Decision(r, [SaveRun(r), SetCapacity("g", max_size=4)]))
    earlier = run(StepState.SURGING, raised=1)
    earlier.steps[0].intent_at = T0 - timedelta(minutes=1)
    assert not advance.outcome_by_event(Decision(earlier, [SaveRun(earlier), SetCapacity("g", desired=3)]))
    stopping = run(StepState.SURGING, raised=1, status=RunStatus.PAUSING)
    stopping.steps[0].intent_at = stopping.updated_at
    assert not advance.outcome_by_event(Decision(stopping, [SaveRun(stopping), SetCapacity("g", desired=3)]))


def test_a_surge_costs_one_snapshot_and_the_lock_rides_on_the_saves(cluster: Cluster) -> None:
    deps = cluster.new_deps()
    deps.runs.create(pending_run(cluster.instances()[0]))
    counted: Counter[str] = Counter()
    deps.store.table.meta.client.meta.events.register("before-call", lambda model, **_: counted.update([model.name]))
    out = advance.advance_run(deps, None, 0.0, "first")  # raises the group, its launch wait's start in the save
    calls = Counter(counted)
    stored = deps.runs.get(RUN_ID)
    assert cluster.sizes() == (3, 3) and stored is not None and stored.version == 1, out
    assert stored.steps[0].waiting_since == {"spare_launch": stored.updated_at}  # the deadline counts from the surge
    assert "to launch a spare" in stored.waiting and out["run"]["waiting"] == stored.waiting
    # the first pass's snapshot (two Queries) and the COMP# ledgers (before a group's first surge); no pass after the
    # raise (the launch and the spare's "Node Ready" are events); the save takes the lock, the invocation gives it up
    # after the raise: no PutItem or GetItem
    assert calls == Counter({"Query": 3, "TransactWriteItems": 1, "UpdateItem": 1}), calls
    lock = deps.lock.current() or {}
    assert lock.get("holder") is None and lock["fencing"] == 1


def test_only_a_pass_of_drains_alone_that_ends_the_invocation_passes_the_lock_in_its_save() -> None:
    from lambdas.refresher.passes import passing

    r = run(StepState.DRAINING)
    assert passing(Decision(r, [SaveRun(r), _drain()]))
    assert passing(Decision(r, [SaveRun(r), _drain(0), _drain(1), Metric("DrainsSent")]))
    # a save with nothing after it (a wait's start), an effect that needs the lock held, a pass read back: no
    assert not passing(Decision(r, [SaveRun(r)]))
    assert not passing(Decision(r, [SaveRun(r), _drain(), SetCapacity("g", desired=3)]))
    assert not passing(Decision(r, [SaveRun(r), _drain()], [Wait(WaitKind.TERMINATION, "i-1")]))
    pausing = run(StepState.DRAINING, status=RunStatus.PAUSING)
    assert not passing(Decision(pausing, [SaveRun(pausing), _drain()]))
    # more drains than one transaction records with the save: their CMD# items are written apart, under the lease
    assert not passing(Decision(r, [SaveRun(r), *(_drain(i) for i in range(99))]))


def test_a_tick_with_no_active_run_reads_no_membership(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tick runs every 5 minutes of the week, a run only during a refresh: with none active, the pass reads the
    LOCK item and the runs (one Query) and stops, without the NODE# items (a Query of every node, and at 1,000 nodes
    most of an idle tick's time in the simulation)."""
    read = []
    real = snapshot_module.with_membership

    def recorded(*args: Any, **kwargs: Any) -> Any:
        read.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(advance, "with_membership", recorded)
    monkeypatch.setattr(snapshot_module, "with_membership", recorded)  # however a pass reaches it
    assert advance.advance_run(cluster.new_deps(), None, 0.05, "tick")["status"] == "idle"
    assert read == []
    deps = cluster.new_deps()
    deps.runs.create(surging_run(cluster.instances()[0]))
    advance.advance_run(cluster.new_deps(), None, 0.05, "tick")
    assert read  # an active run's pass reads membership
