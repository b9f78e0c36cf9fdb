"""Invariant 1's count (``sim.ready_count.ReadyCount``): what it excuses of a Spot reclaim, and what it does not."""

from __future__ import annotations

from dataclasses import replace

import pytest

from core.model import NodeRecord
from sim.ready_count import ReadyCount
from sim.run import run_seed
from sim.schedules import STORM

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
