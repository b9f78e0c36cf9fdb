"""Storm seed 210054 (30 nodes x 2 days; the first soak of ``foreign_terminate``), kept as a regression case of a
checker bug: "3 no termination before drain" blamed on a spare whose node registered after the agent's last
``MEMBERSHIP`` mark (docs/SIMULATION.md, "Findings").

An agent restart (``leader``) at 16.11 h moved the agent's membership steps off the Lambdas' ticks (every minute at
.892 s past). A rebalance followed by a reclaim took step 1's old instance of a refresh of ``nodes-us-east-1c``
(``max_surge`` 2) while its spare launched; the spare's node registered at 70,456.6 s, after the mark of 70,442.9 s,
and the refresher's pass at 70,500 s gave the spare back: absent from a confirmed list, it has no node as far as any
Lambda can know (``lambdas.refresher.decide.undo.undoing``), so it was terminated with decrement, not drained first.
Its group's termination lifecycle hook drains it (the interruption Lambda completes the action only after the drain,
and that completion is judged as any termination). The foreign termination the shrinker keeps (5.86 h, another AZ)
only moves the run's timing. ``Checker._registered_unknown`` excuses an Auto Scaling termination of a node registered
after the last mark; the same seed without it still breaks invariant 3.
"""

from __future__ import annotations

import pytest

from sim.invariants import Checker
from sim.run import run_seed
from sim.schedules import STORM


def test_a_spare_whose_node_registered_after_the_last_membership_mark_is_the_hook_s_to_drain() -> None:
    result = run_seed(210054, 30, 2.0, profile=STORM)
    assert result.violation is None, result.summary()


def test_without_the_excuse_the_seed_breaks_invariant_3(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Checker, "_registered_unknown", lambda _checker, _node: False)
    result = run_seed(210054, 30, 2.0, profile=STORM)
    assert result.violation is not None
    assert result.violation.invariant == "3 no termination before drain"
    assert "i-471490cc58f185a49" in result.violation.detail
