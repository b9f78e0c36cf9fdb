"""Invariant 1's count (``sim.ready_count.ReadyCount``): what it excuses of a Spot reclaim, and what it does not."""

from __future__ import annotations

from dataclasses import replace
from unittest.mock import MagicMock

import pytest

from core.model import NodeRecord
from sim.health import Unwell
from sim.ready_count import Moment, ReadyCount, moment
from sim.run import run_seed
from sim.schedules import STORM
from sim.world_view import NodeIndex

START = frozenset({"old-1", "old-2", "old-3"})
RUNNING = {f"i-{n}": ("nodes-c", "c") for n in ("s1", "s2", "s3", "r1")}
INSTANCES = {"old-1": "i-o1", "old-2": "i-o2", "old-3": "i-o3", "s1": "i-s1", "s2": "i-s2", "s3": "i-s3", "r1": "i-r1"}


def short(count: ReadyCount, ready: set[str], t: float, lost: int) -> str:
    return count.short("run", frozenset(ready), INSTANCES, RUNNING, t, lost, 0)


def two_steps_done(count: ReadyCount) -> None:
    """A run replaced old-1 and old-2 with spares s1 and s2, each Ready before its old instance was terminated."""
    count.started("run", START)
    assert short(count, {*START, "s1"}, 60.0, 0) == ""
    count.refresher_terminated(100.0)
    assert short(count, {"old-2", "old-3", "s1", "s2"}, 200.0, 1) == ""
    count.refresher_terminated(300.0)
    assert short(count, {"old-3", "s1", "s2"}, 400.0, 2) == ""


def test_a_spare_spot_reclaims_is_not_the_refreshs_loss_until_its_replacement_comes() -> None:
    count = ReadyCount()
    two_steps_done(count)
    count.spot_reclaimed("i-s1", 1000.0, 1120.0)  # the refresher terminated nothing from 1000 to 1120
    assert short(count, {"old-3", "s2"}, 1140.0, 2) == ""
    assert short(count, {"old-3", "s2", "r1"}, 1500.0, 2) == ""  # Auto Scaling's replacement counts as the gain
    # the excuse ended with the replacement: a third loss with no new node is the refresh's
    assert "3 nodes it replaced are gone, 2 new Ready" in short(count, {"s2", "r1"}, 1600.0, 3)


def test_a_reclaim_the_refresher_terminated_something_under_is_its_loss() -> None:
    """Seed 123033's bug: the refresher terminated an old instance after the doomed node's warning, counting it."""
    count = ReadyCount()
    two_steps_done(count)
    count.refresher_terminated(1050.0)
    count.spot_reclaimed("i-s1", 1000.0, 1120.0)
    assert "0 new ones reclaimed by Spot" in short(count, {"old-3", "s2"}, 1140.0, 2)


def test_a_reclaim_of_a_node_that_was_never_counted_is_not_excused() -> None:
    count = ReadyCount()
    two_steps_done(count)
    count.spot_reclaimed("i-s3", 1000.0, 1120.0)  # s3 never Ready at a scan: never in the gain
    assert short(count, {"old-3", "s1", "s2"}, 1140.0, 2) == ""
    assert "3 nodes it replaced are gone" in short(count, {"s1", "s2"}, 1200.0, 3)


def test_a_node_a_fault_held_not_ready_at_the_start_is_neither_its_loss_nor_its_gain() -> None:
    """Seed 195023: a node a fault holds NotReady counts as Ready (not the refresh's doing), but at the run's start
    it is no Ready capacity: ``started`` leaves it out of what the run must keep; its answering again is no gain, so
    a loss of the refresh's with no new node is still found."""
    count = ReadyCount()
    assert count.started("run", START | {"sick"}, frozenset({"sick"})) == START
    assert count.started("run", START) == START  # as first seen
    assert short(count, {*START, "sick"}, 60.0, 0) == ""
    assert short(count, {"old-2", "old-3", "sick", "s1"}, 200.0, 1) == ""  # old-1 replaced by s1
    assert "2 nodes it replaced are gone, 1 new Ready" in short(count, {"old-3", "sick", "s1"}, 300.0, 2)


@pytest.mark.slow
def test_seed_123033s_bug_is_still_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """The refresher counting a Ready node under a Spot warning as capacity (``NodeRecord.serving`` as ``ready``):
    step 0's spare is reclaimed, Auto Scaling's replacement is warned before it launches and step 1 counts it. The
    first reclaim is excused only until that replacement comes; the second, under step 1's terminate, never."""
    monkeypatch.setattr(NodeRecord, "serving", property(lambda record: record.ready))
    before_specs = replace(
        STORM,
        not_ready_per_day=0,
        bootstrap_per_day=0,
        master_refreshes_per_day=0,
        foreign_terminates_per_day=0,
        foreign_after_refresh=0,
        spec_room=0,
        kops_specs_per_day=0,
        spec_after_refresh=0,
        surge_two=0,
    )
    result = run_seed(123033, 30, 2.0, profile=before_specs)
    assert result.violation is not None
    assert result.violation.invariant == "1 Ready workers never below the start during a refresh"


GROUP = frozenset({*START, "s1", "s2"})


def seen(node: str, ready: set[str], known: dict[str, float] | None = None) -> Moment:
    """The refresher terminating ``node``'s instance, ``ready`` Ready in its group as a Lambda could see it, ``known``
    held NotReady by a fault (-> since) that the agent reported."""
    return Moment(node, "nodes-c", GROUP, frozenset(ready), known or {})


def scan(count: ReadyCount, ready: set[str], unwell: Unwell, t: float, lost: int) -> str:
    """A scan's judgement: ``ready`` the Ready workers and those a fault holds NotReady (as the checker's)."""
    return short(count, count.counted("run", frozenset(ready), unwell), t, lost)


def test_an_old_node_terminated_while_its_spare_is_known_not_ready_is_the_refreshs_loss() -> None:
    """The gap the count left: a new node a fault holds NotReady counted as the run's gain, so the refresher
    terminating an old node while its spare was NotReady went unseen (its Ready check put out of action)."""
    count, unwell = ReadyCount(), Unwell()
    count.started("run", START)
    assert scan(count, {*START, "s1"}, unwell, 60.0, 0) == ""  # s1 came, Ready
    unwell.nodes["s1"] = (100.0, False)  # a fault takes its kubelet; the agent reports it
    assert scan(count, {*START, "s1"}, unwell, 120.0, 0) == ""  # nothing terminated: not the refresh's doing
    count.refresher_terminated(400.0, seen("old-1", {"old-1", "old-2", "old-3"}, {"s1": 100.0}))
    assert count.doubted == {"run": {"s1": 100.0}}
    assert "1 nodes it replaced are gone, 0 new Ready" in scan(count, {"old-2", "old-3", "s1"}, unwell, 420.0, 1)
    del unwell.nodes["s1"]  # it answers again: Ready since, the run's gain
    assert scan(count, {"old-2", "old-3", "s1"}, unwell, 480.0, 1) == ""
    assert count.doubted == {"run": {}}


def test_a_spare_ready_at_its_termination_that_a_fault_takes_later_is_still_the_runs_gain() -> None:
    """s1 stood for old-1 (Ready when it went): a fault making it NotReady after is not the refresh's doing, nor
    is old-2 replaced by s2 while s1 is NotReady, known (s2 stands for it)."""
    count, unwell = ReadyCount(), Unwell()
    count.started("run", START)
    count.refresher_terminated(100.0, seen("old-1", {*START, "s1"}))
    assert count.credited == {"run": {"nodes-c": {"s1"}}}
    unwell.nodes["s1"] = (200.0, False)
    assert scan(count, {"old-2", "old-3", "s1"}, unwell, 300.0, 1) == ""
    count.refresher_terminated(500.0, seen("old-2", {"old-2", "old-3", "s2"}, {"s1": 200.0}))
    assert count.credited == {"run": {"nodes-c": {"s1", "s2"}}} and count.doubted == {"run": {}}
    assert scan(count, {"old-3", "s1", "s2"}, unwell, 540.0, 2) == ""
    count.refresher_terminated(560.0, seen("old-2", {"old-3", "s2"}, {"s1": 200.0}), first=False)  # its lifecycle
    assert count.credited == {"run": {"nodes-c": {"s1", "s2"}}}  # one termination of old-2: no third credit


def test_each_termination_is_stood_for_by_one_new_node() -> None:
    """Two spares Ready at old-1's termination (a surge of two): one stands for it; the other, NotReady, known, when
    old-2 goes, is no gain (its being Ready at an earlier termination does not make it old-2's)."""
    count, unwell = ReadyCount(), Unwell()
    count.started("run", START)
    assert scan(count, {*START, "s1"}, unwell, 60.0, 0) == ""
    assert scan(count, {*START, "s1", "s2"}, unwell, 120.0, 0) == ""
    count.refresher_terminated(200.0, seen("old-1", {*START, "s1", "s2"}))
    assert count.credited == {"run": {"nodes-c": {"s1"}}}  # the earliest come
    unwell.nodes["s2"] = (300.0, False)
    assert scan(count, {"old-2", "old-3", "s1", "s2"}, unwell, 360.0, 1) == ""
    count.refresher_terminated(600.0, seen("old-2", {"old-3", "s1"}, {"s2": 300.0}))
    assert "2 nodes it replaced are gone, 1 new Ready" in scan(count, {"old-3", "s1", "s2"}, unwell, 660.0, 2)


def test_a_fault_no_lambda_could_know_yet_is_not_the_refreshs() -> None:
    """The spare went NotReady less than the agent's report before the termination (``Unwell.unknown``: ``moment``
    sees it Ready): it stands for the old node."""
    count, unwell = ReadyCount(), Unwell()
    count.started("run", START)
    unwell.nodes["s1"] = (100.0, False)
    count.refresher_terminated(130.0, seen("old-1", {*START, "s1"}))
    assert count.credited == {"run": {"nodes-c": {"s1"}}}
    assert scan(count, {"old-2", "old-3", "s1"}, unwell, 180.0, 1) == ""


def test_moment_sees_a_fault_as_a_lambda_could() -> None:
    """``moment``: the terminated instance's group's nodes; a fault the agent reported is known, a recent one Ready."""
    view = MagicMock()
    view.running_instances.return_value = {"i-o1": ("nodes-c", "c"), "i-s1": ("nodes-c", "c"), "i-s2": ("nodes-c", "c")}
    view.running_instances.return_value["i-x"] = ("nodes-b", "b")
    view.node_index.return_value = NodeIndex(
        {"old-1": "i-o1", "s1": "i-s1", "s2": "i-s2", "x": "i-x"}, (), frozenset({"old-1", "x"})
    )
    view.table_item.return_value = None  # no MEMBERSHIP mark: only the 120 s lag excuses
    unwell = Unwell({"s1": (0.0, False), "s2": (950.0, False), "x": (0.0, False)})
    assert moment(view, unwell, "i-o1", 1000.0) == Moment(
        "old-1", "nodes-c", frozenset({"old-1", "s1", "s2"}), frozenset({"old-1", "s2"}), {"s1": 0.0}
    )
    assert moment(view, unwell, "i-gone", 1000.0) is None
