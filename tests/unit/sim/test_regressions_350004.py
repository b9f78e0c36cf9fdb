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

from typing import Any

import pytest

import sim.watch
from adapters.dynamo.commands import CommandItems, command_sk
from core.exceptions import CommandTransitionError
from sim.invariants import view_epoch
from sim.run import run_seed
from sim.schedules import RESIZE, Fault
from sim.world import World

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


def test_a_takeover_the_replenisher_s_crashes_delay_is_waited_for() -> None:
    """The shrunk schedule with the replenisher crashing at every invocation from 37,790 s to 38,000 s: no sweep runs
    until the tick at 38,040 s, 277 s after the dead life's heartbeat went stale (37,762.9 s), which re-sends the
    command (its instance gone meanwhile: the lifecycle action's heartbeat timed out). The product can do no sooner;
    the wait counts the replenisher's crash windows since the sweep could first re-send it (``TAKEOVER_SLACK`` alone,
    180 s, fired at 37,950 s)."""
    crash = Fault(37790.0, "crash", 210.0, (("call", 1), ("function", "replenisher"), ("how", "crash")))
    seen: list[dict[str, Any]] = []

    def look(world: World) -> None:  # the dead life's item, once its heartbeat is stale
        world.kernel.at(37765.0, "test:look", lambda: seen.extend(world.view.table_prefix("CMD#")))

    result = run_seed(350004, 30, 2.0, schedule=(*SHRUNK, crash), profile=RESIZE, mutate=look)
    assert result.violation is None, result.summary()
    (dead,) = [i for i in seen if i.get("instance_id") == "i-b17cc23871ea6921a" and i["status"] == "running"]
    assert dead["worker"] == "agent:0" and not dead.get("resent_at")
    stale = float(dead["heartbeat_at"]) + float(dead["stale_after_seconds"])
    assert stale - view_epoch(0.0) == pytest.approx(37762.9, abs=0.1)


def test_a_drain_never_taken_over_is_still_judged(monkeypatch: pytest.MonkeyPatch) -> None:
    """A product bug the wait must not hide: no life takes over a command whose holder died (``start_command``
    refuses a ``running`` item of another worker, stale or not). The sweep's re-sends (every ``COMMAND_SWEEP_SECONDS``)
    are refused in turn; the node stays schedulable and is judged once the wait is over, as before the re-sends
    counted."""
    real = CommandItems.start_command

    def no_takeover(self: CommandItems, command: Any, worker: str, *args: Any, **kwargs: Any) -> int:
        current = self.get(command_sk(command.command_id))
        if current is not None and current.get("status") == "running" and current.get("worker") != worker:
            raise CommandTransitionError("mutant: no takeover", current)
        return real(self, command, worker, *args, **kwargs)

    monkeypatch.setattr(CommandItems, "start_command", no_takeover)
    result = run_seed(350004, 30, 2.0, schedule=SHRUNK, profile=RESIZE)
    assert result.violation is not None and result.violation.invariant == "5 a drained node is cordoned at once"
    assert result.violation.at == pytest.approx(37950.0, abs=5.0)  # the stale heartbeat (37,762.9 s) + 180 s
