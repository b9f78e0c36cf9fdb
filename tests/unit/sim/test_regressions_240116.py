"""Storm seed 240116 (30 nodes x 2 days; the same with ``STORM_BEFORE_FOREIGN``), kept as a regression case of a
checker bug: "4 sizes end where they were" blamed on a MaxSize the refresher left raised, by design, while a fault
kept it from running (docs/SIMULATION.md, "Findings").

A refresh of ``nodes-us-east-1b`` (spec 10 / MaxSize 11, kOps' edit at 6.15 h) raised its MaxSize to 12; a drain
timed out on a PodDisruptionBudget, the run paused and gave its surge back, and at 13:10 (47,400 s) asked MaxSize 11
back (``GroupSurge.restore_since``). A refresher ``crash`` fault (``timeout`` at the 7th port call, 13.06 h for 29.6
minutes) killed every pass at that call, the UpdateAutoScalingGroup itself, until past the restore's ``give_back``
deadline (900 s): at 13:30 the refresher took the restore as refused for good, left MaxSize 12 (``max_left``) and
ended the run ``failed`` ("left raised: nodes-us-east-1b MaxSize 12 (was 11)"), as DESIGN.md has it ("A give-back
Auto Scaling refuses ends the run failed"): a dead invocation cannot be told from a refused call. ``sim.left_raised``
accepts such a recorded MaxSize only when a refresher crash window covers the restore's whole window.
"""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

import pytest

import sim.view
from sim.kernel import EPOCH
from sim.left_raised import crash_excused
from sim.run import run_seed
from sim.schedules import STORM


def test_a_maxsize_left_raised_while_the_refresher_could_not_run_is_accepted() -> None:
    result = run_seed(240116, 30, 2.0, profile=STORM)
    assert result.violation is None, result.summary()


def test_without_the_excuse_the_seed_breaks_invariant_4(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sim.view, "crash_excused", lambda world, _runs: dict(world.restore_excused))
    result = run_seed(240116, 30, 2.0, profile=STORM)
    assert result.violation is not None
    assert result.violation.invariant == "4 sizes end where they were"
    assert "nodes-us-east-1b ends at desired 10 MaxSize 12, was 10/11" in result.violation.detail


def _world(crashes: list[tuple[float, float, str, int, str]]) -> SimpleNamespace:
    return SimpleNamespace(
        restore_excused={"nodes-us-east-1c": {3}},
        lambdas=SimpleNamespace(refresher_settings=SimpleNamespace(give_back_timeout_seconds=900)),
        bus=SimpleNamespace(crashes=crashes),
        kernel=SimpleNamespace(epoch=EPOCH),
    )


def _run(status: str = "failed", max_left: int | None = 12) -> dict[str, object]:
    since = (EPOCH + timedelta(seconds=47400)).isoformat().replace("+00:00", "Z")
    group = {"name": "nodes-us-east-1b", "original_max": 11, "max_raised_to": 12, "max_restored": True}
    return {"status": status, "groups": [group | {"restore_since": since, "max_left": max_left}]}


def test_crash_excused_takes_max_left_only_under_a_refresher_crash_over_the_whole_window() -> None:
    covering = [(47015.0, 48791.0, "refresher", 7, "timeout")]
    assert crash_excused(_world(covering), [_run()]) == {"nodes-us-east-1c": {3}, "nodes-us-east-1b": {12}}  # type: ignore[arg-type]
    short = [(47015.0, 48000.0, "refresher", 7, "timeout")]  # the refresher ran before the deadline
    other = [(47015.0, 48791.0, "replenisher", 7, "timeout")]
    late = [(47500.0, 48791.0, "refresher", 7, "timeout")]  # the first ask ran
    for crashes in (short, other, late, []):
        assert crash_excused(_world(crashes), [_run()]) == {"nodes-us-east-1c": {3}}  # type: ignore[arg-type]
    for run in (_run(status="paused"), _run(max_left=None)):
        assert crash_excused(_world(covering), [run]) == {"nodes-us-east-1c": {3}}  # type: ignore[arg-type]
