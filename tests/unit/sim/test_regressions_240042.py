"""Storm seed 240042 (30 nodes x 2 days), kept as a regression case of a checker bug: "1 Ready workers never below the
start during a refresh" blamed on a run whose Ready spare another tool terminated (docs/SIMULATION.md, "Findings").

A refresh of ``nodes-us-east-1a`` (run ``20260106T011637Z-aa6f58``, 25.28 h) replaced 7 old nodes, each only once its
spare was Ready. Step 6's spare (``i-4abfa959141c8a995``) registered at 92,402 s and was Ready before 92,419.6 s, when
the refresher drained the old node; it terminated that one at 92,454.2 s. At 92,459.961 s a ``foreign_terminate``
(``decrement``, ``target`` ``any``) took step 3's spare (``i-cba56b27128ca87a0``), Ready since 25.54 h. The checker's
scans run once a simulated minute: the one at 92,400 s had not seen step 6's spare Ready yet, the next (92,460 s) saw it
first, 39 ms after the foreign termination, and took it for the node that came in the group after it (the terminated
spare's stand-in, ``ReadyCount._spot``): the foreign termination was no longer excused, 7 gone against 6 new Ready.
The node a reclaim's excuse waits for is launched after it, or after its Spot warning (Auto Scaling's replacement,
or the product's answer to a decrement); a node is now taken to have come when it registered (its
``creationTimestamp``), not when a scan first saw it Ready, and a Spot reclaim to count from its warning. Without
foreign terminations (``STORM_BEFORE_FOREIGN``) the seed held; the ``doubted`` rule plays no part.
"""

from __future__ import annotations

import pytest

import sim.ready_count
from lambdas.refresher.decide import handover
from sim.ready_count import ReadyCount
from sim.run import run_seed
from sim.schedules import STORM
from sim.world_view import NodeState
from tests.unit.sim.handover_baseline import whole_group_but_the_old

START = frozenset({"old-1", "old-2", "old-3"})
RUNNING = {f"i-{n}": ("nodes-c", "c") for n in ("s1", "s2", "r1")}
INSTANCES = {"old-1": "i-o1", "old-2": "i-o2", "old-3": "i-o3", "s1": "i-s1", "s2": "i-s2", "r1": "i-r1"}


def node(name: str, created: str) -> NodeState:
    return NodeState(name, INSTANCES[name], False, True, False, False, False, created)


# s2 registered at 0:06:40 (400 s), before the foreign termination at 459.9 s; r1 (the replacement) at 0:09:00
NODES = [node("s1", "2026-01-05T00:01:00Z"), node("s2", "2026-01-05T00:06:40Z"), node("r1", "2026-01-05T00:09:00Z")]


def short(count: ReadyCount, ready: set[str], t: float, lost: int, *, listed: bool = True) -> str:
    return count.short("run", frozenset(ready), INSTANCES, RUNNING, t, lost, 0, (lambda: NODES) if listed else None)


def a_spare_terminated_as_the_next_one_is_first_seen(count: ReadyCount, *, listed: bool = True) -> str:
    """s1 stood for old-1; s2, Ready before old-2 went, is first seen at the scan after another tool took s1."""
    count.started("run", START)
    assert short(count, {*START, "s1"}, 120.0, 0, listed=listed) == ""
    count.refresher_terminated(200.0)
    assert short(count, {"old-2", "old-3", "s1"}, 240.0, 1, listed=listed) == ""
    count.refresher_terminated(454.2)  # old-2, once s2 was Ready (between the scans at 400 and 460)
    count.foreign_terminated("i-s1", 459.961)
    return short(count, {"old-3", "s2"}, 460.0, 2, listed=listed)


def test_a_node_registered_before_a_foreign_termination_does_not_end_its_excuse() -> None:
    count = ReadyCount()
    assert a_spare_terminated_as_the_next_one_is_first_seen(count) == ""
    assert short(count, {"old-3", "s2", "r1"}, 600.0, 2) == ""  # the replacement, registered after, stands for s1
    # the excuse ended with the replacement: a third loss with no new node is the refresh's
    assert "3 nodes it replaced are gone, 2 new Ready" in short(count, {"s2", "r1"}, 660.0, 3)


def test_a_replacement_registered_between_a_reclaim_s_warning_and_the_reclaim_ends_its_excuse() -> None:
    """Seed 123033's way: Auto Scaling's answer to a Spot warning registers before the reclaim (r1 at 540 s)."""
    count = ReadyCount()
    count.started("run", START)
    assert short(count, {*START, "s1"}, 120.0, 0) == ""
    count.refresher_terminated(200.0)
    count.spot_reclaimed("i-s1", 500.0, 620.0)
    assert short(count, {"old-2", "old-3", "r1"}, 660.0, 1) == ""  # r1 stands for s1
    assert "2 nodes it replaced are gone, 1 new Ready" in short(count, {"old-3", "r1"}, 720.0, 2)


def test_taken_to_come_when_first_seen_the_same_node_ends_the_excuse() -> None:
    """The count before the fix (no registrations: a node comes at the scan that first sees it Ready)."""
    assert "2 nodes it replaced are gone, 1 new Ready" in a_spare_terminated_as_the_next_one_is_first_seen(
        ReadyCount(), listed=False
    )


def test_storm_seed_240042_holds() -> None:
    result = run_seed(240042, 30, 2.0, profile=STORM)
    assert result.violation is None, result.summary()


def test_without_the_registrations_the_seed_breaks_invariant_1(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the registrations read at a scan, nor the nodes Ready at the refresher's terminations (which came, at
    their registration, since resize seed 360376: step 6's spare stood for the termination at 92,454.2 s)."""
    monkeypatch.setattr(sim.ready_count, "_registered", lambda _nodes, _names: {})
    monkeypatch.setattr(sim.ready_count, "_arrivals", lambda _view, _ready, _t: {})
    # the hand-overs' baselines as they were when the seed was found: since resize seed 364029 the successors claim
    # their replacements the other way round, and the spare first seen after the foreign termination is another
    monkeypatch.setattr(handover, "successor_baseline", whole_group_but_the_old)
    result = run_seed(240042, 30, 2.0, profile=STORM)
    assert result.violation is not None
    assert result.violation.invariant == "1 Ready workers never below the start during a refresh"
    assert "run 20260106T011637Z-aa6f58: 7 nodes it replaced are gone, 6 new Ready" in result.violation.detail
