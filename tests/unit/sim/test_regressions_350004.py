"""Seed 350004 of the ``resize`` profile (30 nodes x 2 days, found on its second soak), kept as a regression case of a
checker bug: "5 a drained node is cordoned at once" judged a drain whose agent life had died (docs/SIMULATION.md,
"Findings").

kOps resized ``nodes-us-east-1b`` up by 2 (10.18 h) inside a ``bad_bootstrap`` window of its AZ: one new instance's
node had not joined 1,020 s later, and the replenisher's cleanup terminated it without decrement. Its termination
lifecycle action made the interruption Lambda send a drain with no node name; the agent started it (37,702.9 s) and
waited for the node to register (``steps.NodeWait``). The agent crashed 3 s later (a crash hands nothing back); the
node joined at 37,738 s with no life to cordon it. The new life found the command running under the dead worker
until its heartbeat went stale (60 s); the message, received three times (a forged message's receives among them),
went to the dead-letter queue, and the replenisher's sweep sent the command again at its next tick (37,800 s), when
the drain resumed and cordoned at once. The watch now waits for such a takeover (``sim.watch.TAKEOVER_SLACK``).
"""

from __future__ import annotations

import pytest

import sim.watch
from sim.run import run_seed
from sim.schedules import RESIZE, Fault

# the resize profile's 120 entries shrunk (``sim.run.shrink_seed``, on the watch before the fix)
SHRUNK = (
    Fault(31089.261, "bad_bootstrap", 6556.281, (("az", "us-east-1b"), ("never", 0))),
    Fault(33722.183, "forged_message", params=(("variant", "mismatch"),)),
    Fault(36653.805, "kops_spec", params=(("above", 1), ("az", "us-east-1b"), ("below", 1), ("grow", 2))),
    Fault(37706.104, "agent_restart", params=(("leader", 0),)),
)


@pytest.mark.parametrize("schedule", [None, SHRUNK], ids=["seed", "shrunk"])
def test_a_drain_of_a_dead_agent_life_is_judged_once_it_can_be_taken_over(schedule: tuple[Fault, ...] | None) -> None:
    result = run_seed(350004, 30, 2.0, schedule=schedule, profile=RESIZE)
    assert result.violation is None, result.summary()


@pytest.mark.parametrize(
    ("schedule", "node"),
    [
        (None, "ip-10-0-0-47.ec2.internal (i-31103eba10f2bba76)"),
        (SHRUNK, "ip-10-0-0-34.ec2.internal (i-b17cc23871ea6921a)"),  # fewer faults: other ids
    ],
    ids=["seed", "shrunk"],
)
def test_without_the_takeover_wait_the_seed_breaks_invariant_5(
    monkeypatch: pytest.MonkeyPatch, schedule: tuple[Fault, ...] | None, node: str
) -> None:
    monkeypatch.setattr(sim.watch.Watch, "_taken_over_later", lambda self, sk, t: False)
    result = run_seed(350004, 30, 2.0, schedule=schedule, profile=RESIZE)
    assert result.violation is not None
    assert result.violation.invariant == "5 a drained node is cordoned at once"
    assert node in result.violation.detail, result.violation.detail
