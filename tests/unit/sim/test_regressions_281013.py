"""Storm seed 281013 (12 nodes x 1 day, one master), kept as a regression case of a checker bug: "5 a drained node is
cordoned at once" blamed a refresh drain's own end, at its deadline, on the drain (docs/SIMULATION.md, "Findings").

A manual refresh (``max_surge`` 2) sent drain ``refresh-20260105T050319Z-94dc95-0`` at 18,311.079 s (deadline 600 s
later); the agent started it and cordoned ``ip-10-0-0-7`` at that instant. A PodDisruptionBudget held one of its pods
(``pdb_block`` from 3.85 h for 179 min), so the drain evicted until its deadline, 18,911.079 s, then concluded
``failed`` and gave its cordon back (``uncordon_on_failure``, a refresh drain's). DynamoDB refused every call from
18,421.8 s for 8.6 minutes, so the ``CMD#`` item still read ``running``. The kernel's float instant of the deadline
(18,911.0793316 s) lies 0.56 microseconds below the deadline read back from its ISO string (18,911.0793321 s): the
agent's datetimes (microseconds) read no second left, the watch read the drain as still under way and the uncordon as a
cordon missed. ``sim.watch.drain_over`` judges the drain over from its deadline on, to the microsecond.
"""

from __future__ import annotations

import pytest

import sim.watch
from sim.run import run_seed
from sim.schedules import STORM
from sim.watch import _Drain, drain_over


def test_a_drain_uncordoning_at_its_deadline_under_a_table_outage_holds() -> None:
    result = run_seed(281013, 12, 1.0, masters=1, profile=STORM)
    assert result.violation is None, result.summary()


def test_judging_the_deadline_instant_inside_the_drain_breaks_invariant_5(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sim.watch, "drain_over", lambda drain, t: t > drain.cordon_until)  # the check before the fix
    result = run_seed(281013, 12, 1.0, masters=1, profile=STORM)
    assert result.violation is not None
    assert result.violation.invariant == "5 a drained node is cordoned at once"
    assert "ip-10-0-0-7.ec2.internal" in result.violation.detail


def test_drain_over_from_its_deadline_to_the_microsecond() -> None:
    drain = _Drain("i-0", 18311.079332113266, 18911.079332113266, 18911.079332113266, False, None)
    assert drain_over(drain, 18911.07933155648)  # the seed's kernel instant of the deadline
    assert drain_over(drain, 18911.079332113266)
    assert drain_over(drain, 18912.0)
    assert not drain_over(drain, 18911.0793305)  # 1.6 microseconds before: still the drain's
    assert not drain_over(drain, 18906.0)
