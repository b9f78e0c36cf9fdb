"""Storm seeds found with the node health faults and master refreshes (``sim.health``; a 2026-12-07 storm soak, 30
nodes x 2 days), kept as regression cases on their shrunk schedules (``python -m sim run --shrink-runs 60`` on the
code before the fix), run only as long as the case needs. Each broke on the code before its fix.

- Seed 185279, six faults: a kube API refusing every call for 9.6 minutes, a manual refresh of every master group in
  it, then a master's kubelet silent for 21 minutes (the rest set the scene: a blocked budget, two Spot bursts). The
  agent could not read the nodes, its ``MEMBERSHIP`` mark went stale; the first master's drain ran once the API was
  back, and the refresher terminated it at once, 307 s after another master went NotReady: it asked that every
  master be Ready only before the drain ("2 masters one at a time, only while all Ready"). Fixed in
  ``lambdas.refresher.decide.replace.masters_ready_besides``: asked again before the termination, under the step's
  ``nodes_ready`` deadline (``tests/unit/lambdas/refresher/decide/test_master_terminate.py`` keeps the pure case).
- Seed 185078, three faults: an AZ's instances joining late, a ``max_surge`` 2 refresh there, then every refresher
  invocation crashing for 28.6 minutes. The spare launched in 40 s and its node registered late; the step's record
  kept ``spare_launch`` beside ``spare_register`` ("8 no refresh wait past its deadline": 2404 s in ``spare_launch``).
  Fixed in ``lambdas.refresher.decide.worker.surging``: entering a surge wait ends those before it
  (``tests/unit/lambdas/refresher/decide/test_surge_waits_end.py``).
"""

from __future__ import annotations

import pytest

from sim.run import run_seed
from sim.schedules import Fault
from tests.unit.sim.storm_profiles import STORM_BEFORE_FOREIGN

KUBE_DOWN = (("code", "TooManyRequests"), ("operation", ""), ("probability", 1.0), ("service", "kube"))
SEED_185279 = (
    Fault(at=1881.301, kind="pdb_block", duration=7269.114, params=()),
    Fault(at=2656.172, kind="spot_burst", duration=369.382, params=(("az", "us-east-1c"), ("count", 2))),
    Fault(at=8210.227, kind="spot_burst", duration=89.287, params=(("az", "us-east-1b"), ("count", 2))),
    Fault(at=39722.213, kind="api", duration=575.589, params=KUBE_DOWN),
    Fault(at=39759.073, kind="manual_refresh", duration=0.0, params=(("masters", 1),)),
    Fault(at=39991.91, kind="node_not_ready", duration=1275.294, params=(("master", 1), ("pick", 0.5312415446880498))),
)
SEED_185078 = (
    Fault(at=6802.407, kind="bad_bootstrap", duration=8127.665, params=(("az", "us-east-1c"), ("never", 0))),
    Fault(at=11875.932, kind="manual_refresh", duration=0.0, params=(("az", "us-east-1c"), ("max_surge", 2))),
    Fault(
        at=12688.791, kind="crash", duration=1717.429, params=(("call", 4), ("function", "refresher"), ("how", "crash"))
    ),
)


@pytest.mark.slow
def test_a_drained_master_waits_for_a_master_gone_not_ready_during_its_drain() -> None:
    """The whole seed: the termination comes 631 s after the agent's last mark (stale: no record counts as Ready), so
    the refresher, asking again, waits (the shrunk schedule's comes at 583 s: the product could not know)."""
    result = run_seed(185279, 30, 2.0, profile=STORM_BEFORE_FOREIGN, trace=True)
    assert result.violation is None, result.summary()
    assert any("masters to be Ready before terminating" in line for line in result.trace)  # the case is met


def test_a_master_terminated_on_a_fresh_mark_from_before_another_went_not_ready_is_not_blamed() -> None:
    """The shrunk schedule: the mark the refresher read was 583 s old, within ``MEMBERSHIP_MAX_AGE_SECONDS``, and
    older than the NotReady (the agent could not read the nodes since): no Lambda could know (``Unwell.unknown``)."""
    result = run_seed(185279, 30, 0.5, schedule=SEED_185279)
    assert result.violation is None, result.summary()


def test_a_late_registering_spare_under_a_refresher_outage_is_no_launch_wait_past_its_deadline() -> None:
    result = run_seed(185078, 30, 0.25, schedule=SEED_185078)
    assert result.violation is None, result.summary()


def test_a_refused_master_terminate_is_asked_again_only_while_the_other_masters_are_ready() -> None:
    """Storm seed 189175 (30 nodes x 2 days): a refresh of the masters drained one, Auto Scaling refused its terminate
    (``ScalingActivityInProgress`` for 6.6 minutes), another master went NotReady, and the invocation's retries asked
    the terminate again 168 s into it ("2 masters one at a time, only while all Ready"): the check before the first ask
    was not made again (``replace.terminating``)."""
    result = run_seed(189175, 30, 2.0, profile=STORM_BEFORE_FOREIGN)
    assert result.violation is None, result.summary()


def test_a_master_on_its_way_out_is_not_one_the_next_must_wait_for() -> None:
    """Storm seed 191142 (30 nodes x 2 days), a checker bug: a refresh of the masters terminated the second master,
    whose instance stayed in its termination lifecycle wait (the interruption Lambda timing out), and a fault then
    silenced that same master's kubelet; the third master's termination was blamed on it ("2 masters one at a time,
    only while all Ready"), though its replacement was Ready. A master the refresher terminated is on its way out."""
    result = run_seed(191142, 30, 2.0, profile=STORM_BEFORE_FOREIGN)
    assert result.violation is None, result.summary()
