"""Seed 360376 of the ``resize`` profile (30 nodes x 2 days), kept as a regression case of a checker bug: "1 Ready
workers never below the start during a refresh" blamed on a run whose spare another tool terminated, a spare no scan
had seen Ready (docs/SIMULATION.md, "Findings").

A refresh of ``nodes-us-east-1a`` (run ``20260105T104852Z-0ccf66``) found step 3's spare (``i-55830127fc29eaf42``,
launched at 39,806 s) Ready at 39,849.5 s, drained the old node and terminated it without decrement at 39,881.7 s (its
surge unit passed to step 4, whose spare is Auto Scaling's replacement). At 39,889.978 s a ``foreign_terminate``
(``decrement``, ``target`` ``spare``) took that spare. The checker's scans run once a simulated minute: the one at
39,840 s had not seen it Ready, the one at 39,900 s found it gone. A node the run gained that Spot or another tool then
took is excused (``sim.ready_count``), but only one some scan had seen: this one never "came", and the run was charged
4 nodes gone against 3 new Ready while the replacement launched. The product did nothing wrong: it terminated the old
node once its spare was Ready. A node Ready at one of the refresher's terminations, standing for it, now came at its
registration too (``Moment.arrived``).
"""

from __future__ import annotations

import pytest

import sim.ready_count
from sim.ready_count import Moment, ReadyCount
from sim.run import run_seed
from sim.schedules import RESIZE, Fault

# the resize profile's 138 entries shrunk (``sim.run.shrink_seed``, on the checker before the fix)
SHRUNK = (
    Fault(984.542, "pdb_block", 6246.957),
    Fault(1994.803, "manual_refresh", params=(("masters", 1),)),
    Fault(5265.865, "late_event", params=(("delay", 16174),)),
    Fault(16274.394, "manual_refresh", params=(("az", "us-east-1b"), ("max_surge", 2))),
    Fault(16627.948, "node_not_ready", 452.088, (("master", 1), ("pick", 0.27219369712123753))),
    Fault(16983.636, "kops_spec", params=(("above", 0), ("az", "us-east-1b"), ("below", 1))),
    Fault(17841.141, "concurrent", 981.696, (("call", 5), ("function", "interruption"), ("other", "replenisher"))),
    Fault(19550.571, "manual_refresh", params=(("az", "us-east-1b"), ("max_surge", 2))),
    Fault(19935.994, "kops_spec", params=(("above", 0), ("az", "us-east-1b"), ("below", 1))),
    Fault(22725.428, "node_not_ready", 2857.415, (("master", 1), ("pick", 0.5706967577867391))),
    Fault(
        25820.201,
        "api",
        387.872,
        (("code", "Throttling"), ("operation", ""), ("probability", 0.7), ("service", "autoscaling")),
    ),
    Fault(26523.439, "pdb_block", 5726.778),
    Fault(30232.139, "manual_refresh", params=(("az", "us-east-1a"),)),
    Fault(31490.636, "cancel_refresh", params=(("az", "us-east-1c"),)),
    Fault(33130.68, "concurrent", 982.811, (("call", 4), ("function", "interruption"), ("other", "refresher"))),
    Fault(37561.858, "agent_restart", params=(("leader", 0),)),
    Fault(38932.171, "manual_refresh", params=(("az", "us-east-1a"),)),
    Fault(39516.448, "kops_spec", params=(("above", 1), ("az", "us-east-1a"), ("below", 1))),
    Fault(39889.978, "foreign_terminate", params=(("az", "us-east-1a"), ("decrement", 1), ("target", "spare"))),
    Fault(40083.991, "outage", 10889.515, (("az", "us-east-1c"),)),
)


START = frozenset({"old-1", "old-2"})
INSTANCES = {"old-1": "i-o1", "old-2": "i-o2", "s1": "i-s1", "r1": "i-r1"}
RUNNING = {f"i-{n}": ("g", "a") for n in ("o2", "r1")}


def short(count: ReadyCount, ready: set[str], t: float, lost: int) -> str:
    return count.short("run", frozenset(ready), INSTANCES, RUNNING, t, lost, 0, None)


def spare_taken_between_scans(count: ReadyCount, arrived: bool) -> str:
    """s1 registered at 110 s and was Ready at 125 s; the refresher terminated old-1 at 130 s counting it; another
    tool took s1 at 140 s; the scans at 120 s and 180 s never saw it Ready."""
    count.started("run", START)
    assert short(count, set(START), 120.0, 0) == ""
    seen = Moment(
        "old-1",
        "g",
        frozenset({"old-1", "old-2", "s1"}),
        frozenset({"old-1", "old-2", "s1"}),
        arrived={"s1": ("i-s1", 110.0)} if arrived else {},
    )
    count.refresher_terminated(130.0, seen, True, "i-o1")
    count.foreign_terminated("i-s1", 140.0)
    return short(count, {"old-2"}, 180.0, 1)


def test_a_spare_taken_before_any_scan_saw_it_is_excused_until_a_node_comes_after() -> None:
    count = ReadyCount()
    assert spare_taken_between_scans(count, arrived=True) == ""
    assert short(count, {"old-2", "r1"}, 240.0, 1) == ""  # the node that came after stands for it
    # the excuse ended with it: a second loss with no new node is the refresh's
    assert "2 nodes it replaced are gone, 1 new Ready" in short(count, {"r1"}, 300.0, 2)


def test_without_the_arrival_the_spare_never_came() -> None:
    assert "1 nodes it replaced are gone, 0 new Ready" in spare_taken_between_scans(ReadyCount(), arrived=False)


@pytest.mark.parametrize("schedule", [None, SHRUNK], ids=["seed", "shrunk"])
def test_resize_seed_360376_holds(schedule: tuple[Fault, ...] | None) -> None:
    result = run_seed(360376, 30, 2.0, schedule=schedule, profile=RESIZE)
    assert result.violation is None, result.summary()


@pytest.mark.parametrize("schedule", [None, SHRUNK], ids=["seed", "shrunk"])
def test_without_the_arrivals_the_seed_breaks_invariant_1(
    monkeypatch: pytest.MonkeyPatch, schedule: tuple[Fault, ...] | None
) -> None:
    monkeypatch.setattr(sim.ready_count, "_arrivals", lambda _view, _ready, _t: {})
    result = run_seed(360376, 30, 2.0, schedule=schedule, profile=RESIZE)
    assert result.violation is not None
    assert result.violation.invariant == "1 Ready workers never below the start during a refresh"
    assert "4 nodes it replaced are gone, 3 new Ready" in result.violation.detail, result.violation.detail
