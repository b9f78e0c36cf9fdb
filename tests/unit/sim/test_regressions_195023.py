"""Storm seed 195023 (30 nodes x 2 days, the node health faults drawn), kept as a regression case of a checker bug:
"1 Ready workers never below the start during a refresh" counted a node a fault held NotReady at a run's start as
capacity of that start, and its going as the run's loss.

A ``max_surge`` 2 refresh of ``nodes-us-east-1b`` had its last step's spare Ready when a ``node_not_ready`` fault
took that spare's kubelet for 112 minutes (2 s after the refresher counted it); the step's ``nodes_ready`` deadline
passed, the run paused and gave the spare back (drained, terminated with decrement: its lifecycle drain ran to its
deadline, its pods held ``Terminating`` by the silent kubelet). A manual refresh of the group started meanwhile. The
checker counts a node a fault holds NotReady as Ready (``sim.health``: not the refresh's doing), so the spare was in
the new run's start; when its instance went, terminated by the refresher (the paused run, before the new one
started), it was the new run's loss: "4 nodes it replaced are gone, 3 new Ready" on the seed, while the new run had
replaced each of its 3 old nodes by a Ready spare. A NotReady node is no Ready capacity (docs/DESIGN.md, invariant 1),
and the refresher rightly did not count it (``ready_besides``). ``sim.ready_count.ReadyCount.started`` now leaves the
nodes a fault holds NotReady at a run's start out of what it must keep (never its loss, nor its gain when they answer
again: ``tests/unit/sim/test_ready_count.py``).
"""

from __future__ import annotations

import pytest

from lambdas.refresher.decide.context import Context
from sim.ready_count import ReadyCount
from sim.run import run_seed
from sim.schedules import STORM, Fault

INVARIANT_1 = "1 Ready workers never below the start during a refresh"
# the storm profile's 95 entries shrunk (``sim.run.shrink_seed``, 60 runs, on the checker before the fix)
SHRUNK = (
    Fault(
        9070.502,
        "api",
        402.647,
        (("code", "ThrottlingException"), ("operation", ""), ("probability", 0.3), ("service", "sqs")),
    ),
    Fault(26752.629, "manual_refresh", params=(("az", "us-east-1a"), ("max_surge", 2))),
    Fault(79539.343, "agent_restart", params=(("leader", 1),)),
    Fault(81993.5, "late_event", params=(("delay", 15981),)),
    Fault(139185.092, "manual_refresh", params=(("az", "us-east-1b"), ("max_surge", 2))),
    Fault(
        141163.192,
        "api",
        463.065,
        (
            ("code", "ProvisionedThroughputExceededException"),
            ("operation", ""),
            ("probability", 0.3),
            ("service", "dynamodb"),
        ),
    ),
    Fault(141299.691, "node_not_ready", 6717.228, (("master", 0), ("pick", 0.9919249837915182))),
    Fault(142337.952, "manual_refresh", params=(("az", "us-east-1c"),)),
    Fault(142865.914, "manual_refresh", params=(("az", "us-east-1b"),)),
)


def test_a_spare_given_back_not_ready_is_no_loss_of_the_next_run() -> None:
    result = run_seed(195023, 30, 2.0, schedule=SHRUNK, trace=True)
    assert result.violation is None, result.summary()
    trace = "\n".join(result.trace)
    assert "nodes_ready deadline passed: node uncordoned, surge given back" in trace  # the case is met


def test_the_schedule_reaches_the_case(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checker as it was (the start keeps the nodes a fault holds NotReady, and, as before seed 270110's fix,
    those whose instance the refresher terminated before the run) breaks invariant 1 on the shrunk schedule as on the
    seed: the case above is held by the fix, not by a schedule that no longer gets there."""
    started = ReadyCount.started
    monkeypatch.setattr(ReadyCount, "started", lambda count, run_id, ready_now, *_: started(count, run_id, ready_now))
    result = run_seed(195023, 30, 2.0, schedule=SHRUNK)
    assert result.violation is not None
    assert result.violation.invariant == INVARIANT_1
    assert "6 nodes it replaced are gone, 5 new Ready" in result.violation.detail, result.violation.detail


def test_an_old_node_terminated_while_its_spare_is_not_ready_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """The refresher's Ready check put out of action (``ready_besides``: "enough Ready besides those being replaced"
    always yes): the same schedule's last step of the ``max_surge`` 2 run terminates its old node 4 minutes after the
    fault took its spare's kubelet (the agent had reported it). The count counted that spare, NotReady, as the run's
    gain (``sim.health``: a fault's NotReady is not the refresh's doing) and held; it is judged at the termination
    now (``sim.ready_count``: no new node Ready then stands for it). The unchanged product holds the schedule
    (``test_a_spare_given_back_not_ready_is_no_loss_of_the_next_run``)."""
    monkeypatch.setattr(Context, "ready_besides", lambda _p, _facts, _exclude: 10**9)
    result = run_seed(195023, 30, 2.0, schedule=SHRUNK)
    assert result.violation is not None
    assert result.violation.invariant == INVARIANT_1
    assert "10 nodes it replaced are gone, 9 new Ready" in result.violation.detail, result.violation.detail
    # the count as it was (every node a fault holds NotReady in the gain) misses it
    monkeypatch.setattr(ReadyCount, "counted", lambda _count, _run_id, ready_now, _unwell: ready_now)
    assert run_seed(195023, 30, 2.0, schedule=SHRUNK).violation is None


@pytest.mark.slow
def test_the_whole_seed_holds() -> None:
    result = run_seed(195023, 30, 2.0, profile=STORM)
    assert result.violation is None, result.summary()
