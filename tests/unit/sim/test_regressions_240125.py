"""Storm seed 240125 (30 nodes x 2 days), kept as a regression case of a checker bug: "8 no refresh wait past its
deadline" blamed on a ``master_ready`` wait the refresher could not judge (docs/SIMULATION.md, "Findings").

A master refresh (38.82 h) terminated step 2's master at 140,402.6 s; its group could not replace it (no c5.large
capacity in us-east-1c), so the step waited in ``master_ready`` (deadline 900 s). The refresher's passes at 140,700,
141,000 and 141,300 s were inside the deadline (897 s at the last); a ``timeout`` window of the refresher from
141,418 s to 143,103.5 s (1,686 s, at its 4th port call) then timed out every pass and retry. The first pass after the
window (a retry at 143,160 s) paused the run with "master_ready deadline (900 s) passed", but the checker had judged
the wait at 143,160 s already: 2,757 s waited, over the deadline and its 1,800 s slack, of which 1,686 s no pass could
run. The same violation shows without ``foreign_terminate`` faults. ``Watch._refresher_down`` takes the refresher's
crash and timeout windows out of a wait's time; with that excuse gone the seed breaks invariant 8 again.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sim.invariants import view_epoch
from sim.run import run_seed
from sim.schedules import STORM
from sim.watch import Watch


def test_a_wait_past_its_deadline_only_for_a_refresher_timeout_window_is_not_late() -> None:
    result = run_seed(240125, 30, 2.0, profile=STORM)
    assert result.violation is None, result.summary()


def test_without_the_excuse_the_seed_breaks_invariant_8(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Watch, "_refresher_down", lambda _watch, _began, _now: 0.0)
    result = run_seed(240125, 30, 2.0, profile=STORM)
    assert result.violation is not None
    assert result.violation.invariant == "8 no refresh wait past its deadline"
    assert "step 2 in master_ready" in result.violation.detail


def test_refresher_down_counts_only_the_refresher_s_windows_inside_the_wait_once() -> None:
    crashes = [
        (100.0, 200.0, "refresher", 4, "timeout"),
        (150.0, 250.0, "refresher", 2, "crash"),  # overlaps the first: counted once
        (300.0, 900.0, "replenisher", 1, "crash"),  # another function's: not the refresher's
        (800.0, 1200.0, "refresher", 9, "timeout"),  # ends after the look
    ]
    watch = Watch(SimpleNamespace(bus=SimpleNamespace(crashes=crashes)))  # type: ignore[arg-type]
    epoch = view_epoch(0.0)
    assert watch._refresher_down(epoch + 120.0, epoch + 1000.0) == pytest.approx(130.0 + 200.0)
    assert watch._refresher_down(epoch + 260.0, epoch + 700.0) == 0.0
