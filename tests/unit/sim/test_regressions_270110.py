"""Storm seed 270110 (30 nodes x 2 days, found on today's ``STORM``), kept as a regression case of a checker bug:
"1 Ready workers never below the start during a refresh" charged a run with a worker node whose instance the
refresher had terminated before that run was created (docs/SIMULATION.md, "Findings").

A ``max_surge`` 2 refresh of ``nodes-us-east-1b`` (run ``20260105T175703Z-d3933b``, 17.95 h) surged a spare
(``i-47894f40eaf303d02``, node ``ip-10-0-0-57``), drained its first old node, then waited in ``nodes_ready`` while a
``node_not_ready`` fault (18.04 h) held another node of the group; an operator cancelled it, and at 66,300 s, past the
wait's deadline, it uncordoned the old node and gave the spare back: its undo drain had timed out, so it terminated
the spare with decrement. The group's termination lifecycle hook kept the spare's instance in ``Terminating:Wait``
while the interruption Lambda's drain ran to 67,189 s; its node stayed listed and Ready (cordoned). A refresh of the
masters (run ``20260105T183400Z-cb76bc``) was created at 66,840.261 s, and the checker's first scan of it (66,900 s)
took the spare's node into its start. When the hook completed and the instance went (67,203.9 s), the scan at 67,260 s
counted it as the master run's loss: "1 nodes it replaced are gone, 0 new Ready", although that run terminated no
worker at all. A node whose instance is going away is no capacity (docs/DESIGN.md, invariant 1): the nodes of a run's
start whose instance the refresher terminated before the run's ``created_at`` are now left out of what it must keep
(``ReadyCount.going``), until the run terminates that instance itself.
"""

from __future__ import annotations

from typing import Any

import pytest

from sim.ready_count import Moment, ReadyCount
from sim.run import run_seed
from sim.schedules import STORM, Fault

INVARIANT_1 = "1 Ready workers never below the start during a refresh"
DETAIL = "1 nodes it replaced are gone, 0 new Ready"
# the storm profile's 137 entries shrunk (``sim.run.shrink_seed``, on the checker before the fix)
SHRUNK = (
    Fault(64623.843, "manual_refresh", params=(("az", "us-east-1b"), ("max_surge", 2))),
    Fault(64936.379, "node_not_ready", 5423.708, (("master", 0), ("pick", 0.09284207045307158))),
    Fault(66840.261, "manual_refresh", params=(("masters", 1),)),
)
CREATED = "2026-01-05T00:10:00Z"  # 600 s
START = frozenset({"old-1", "old-2", "spare"})
INSTANCES = {"old-1": "i-o1", "old-2": "i-o2", "spare": "i-sp", "s1": "i-s1"}
RUNNING = {f"i-{n}": ("nodes-b", "b") for n in ("o1", "o2", "sp", "s1")}


def seen(node: str, ready: frozenset[str]) -> Moment:
    return Moment(node, "nodes-b", frozenset(INSTANCES), ready)


def short(count: ReadyCount, ready: set[str], t: float, lost: int) -> str:
    return count.short("run", frozenset(ready), INSTANCES, RUNNING, t, lost, 0)


def a_spare_given_back_before_the_run(count: ReadyCount) -> frozenset[str]:
    """An earlier run terminated ``spare`` at 300 s; it is still listed Ready (its hook's drain) when "run" starts."""
    count.refresher_terminated(300.0, seen("spare", START), True, "i-sp")
    return count.started("run", START, frozenset(), INSTANCES, CREATED)


def test_a_node_the_refresher_terminated_before_the_run_is_no_capacity_of_its_start() -> None:
    count = ReadyCount()
    assert a_spare_given_back_before_the_run(count) == {"old-1", "old-2"}
    assert count.started("run", START) == {"old-1", "old-2"}  # as first seen
    # the spare's instance goes (its lifecycle action completed): not in the run's loss, the checker's ``lost`` is
    # the refreshed nodes of what ``started`` keeps; nor is it a gain (it was in the start)
    assert short(count, {"old-1", "old-2"}, 720.0, 0) == ""
    assert "1 nodes it replaced are gone, 0 new Ready" in short(count, {"old-2"}, 780.0, 1)  # the run's own: found


def test_a_terminate_after_the_run_was_created_is_the_run_s() -> None:
    count = ReadyCount()
    count.refresher_terminated(600.0, seen("spare", START), True, "i-sp")  # at its creation, not before it
    assert count.started("run", START, frozenset(), INSTANCES, CREATED) == START


def test_without_the_run_s_creation_nothing_is_left_out() -> None:
    count = ReadyCount()
    count.refresher_terminated(300.0, seen("spare", START), True, "i-sp")
    assert count.started("run", START, frozenset(), INSTANCES) == START
    assert ReadyCount().started("run", START, frozenset(), INSTANCES, CREATED) == START  # nothing terminated


def test_the_run_terminating_that_instance_again_makes_it_its_own_again() -> None:
    """A terminate an earlier run made that did not take (the node kept, Ready): the run's own termination of it is
    judged, and its going is the run's loss, as for any node of its start."""
    count = ReadyCount()
    a_spare_given_back_before_the_run(count)
    count.refresher_terminated(900.0, seen("spare", START | {"s1"}), False, "i-sp")
    assert "spare" in count.started("run", START)
    assert count.credited["run"]["nodes-b"] == {"s1"}  # owed one: s1 stands for it
    assert short(count, {"old-1", "old-2", "s1"}, 960.0, 1) == ""
    assert "2 nodes it replaced are gone, 1 new Ready" in short(count, {"old-2", "s1"}, 1020.0, 2)


def test_storm_seed_270110_holds() -> None:
    result = run_seed(270110, 30, 2.0, profile=STORM)
    assert result.violation is None, result.summary()


def test_the_shrunk_schedule_holds() -> None:
    result = run_seed(270110, 30, 2.0, schedule=SHRUNK, trace=True)
    assert result.violation is None, result.summary()
    trace = "\n".join(result.trace)
    # the case is met (without the operator's cancel the run pauses at its deadline; other ids than the seed's)
    assert "spare drain timed_out, terminate i-c9020c6df7dfd018b with decrement" in trace
    assert "create run 20260105T183400Z-183669" in trace


def without_the_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checker as it was: a run's start keeps the nodes whose instance the refresher terminated before it."""
    started = ReadyCount.started

    def as_before(count: ReadyCount, run_id: str, ready_now: frozenset[str], unwell: Any = frozenset(), *_: Any) -> Any:
        return started(count, run_id, ready_now, unwell)

    monkeypatch.setattr(ReadyCount, "started", as_before)


@pytest.mark.parametrize(
    ("schedule", "run"),
    [(None, "20260105T183400Z-cb76bc"), (SHRUNK, "20260105T183400Z-183669")],
    ids=["seed", "shrunk"],
)
def test_without_the_rule_the_seed_breaks_invariant_1(
    monkeypatch: pytest.MonkeyPatch, schedule: tuple[Fault, ...] | None, run: str
) -> None:
    without_the_rule(monkeypatch)
    result = run_seed(270110, 30, 2.0, schedule=schedule, profile=STORM)
    assert result.violation is not None
    assert result.violation.invariant == INVARIANT_1
    assert result.violation.at == 67260.0
    assert f"run {run}: {DETAIL}" in result.violation.detail, result.violation.detail
