"""Storm seed 188050 (30 nodes x 2 days; found by the soak of 2026-12-07's invariant 1 checker fix, the same on the
code before), kept as a regression case of a product bug: a drained master terminated while another was NotReady
(invariant 2, "masters one at a time, only while all Ready").

Shrunk to three entries: refresher invocations timing out at their 10th port call for 23 minutes, a refresh of the
masters, and a second master NotReady for 7.5 minutes from 100 s after the refresh started. The master step started
with every master Ready and drained its node; the pass that read the drain's success (at t=91,800 s, the other master
NotReady for 193 s, reported by the agent) terminated the drained master all the same: the readiness of the other
masters was checked only before the drain. Fixed in ``lambdas.refresher.decide.replace.masters_ready_besides`` (storm
seed 185279's fix): a drained master is terminated only while every other master is Ready, waiting under the
``nodes_ready`` deadline
(``tests/unit/lambdas/refresher/decide/test_master_terminate_ready.py`` keeps the pure case).
"""

from __future__ import annotations

from sim.run import run_seed
from sim.schedules import Fault

# the storm profile's entries shrunk (``sim.run.shrink_seed``, 150 runs, on the product before the fix)
SHRUNK = (
    Fault(91466.559, "crash", 1380.845, (("call", 10), ("function", "refresher"), ("how", "timeout"))),
    Fault(91506.636, "manual_refresh", params=(("masters", 1),)),
    Fault(91607.806, "node_not_ready", 450.787, (("master", 1), ("pick", 0.980590821044358))),
)


def test_a_drained_master_is_not_terminated_while_another_is_not_ready() -> None:
    result = run_seed(188050, 30, 2.0, schedule=SHRUNK, trace=True)
    assert result.violation is None, result.summary()
    waits = [line for line in result.trace if "masters to be Ready before terminating" in line]
    assert waits, "the drained master never waited for the others"
