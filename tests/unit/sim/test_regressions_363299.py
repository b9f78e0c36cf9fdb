"""Seed 363299 of the ``resize`` profile (30 nodes x 2 days), kept as a regression case of a simulator bug: "5 a
drained node is cordoned at once" broken by a control-plane slot the simulated agent never gave back
(docs/SIMULATION.md, "Findings").

A master refresh (27.99 h) drained step 1's master only after an SQS throttling window: the refresher sent the drain
again at its deadline (101,700 s), and the agent started it at that instant. Its cordon claimed the control-plane
slot (``agent.drain.guard``), then the drain ended "deadline passed before start". The product's worker gives the slot
back when a command ends (``CommandWorker._finish``, through ``engine.guard``); the simulation's stand-in engine
(``sim.agent_worker.ResultEngine``) had no ``guard``, and the simulated agent's in-process guard never expires a slot
(the product's table slots expire at the drain's deadline). The next master refresh (28.60 h) found the slot held: its
drain waited under a running command, the node schedulable. The stand-in exposes the engine's guard now.
"""

from __future__ import annotations

from typing import Any

import pytest

from sim.agent_worker import ResultEngine
from sim.run import run_seed
from sim.schedules import RESIZE, Fault

# the resize profile's entries shrunk (``sim.run.shrink_seed``, on the simulator before the fix)
SHRUNK = (
    Fault(at=100746.968, kind="manual_refresh", duration=0.0, params=(("masters", 1),)),
    Fault(
        at=101082.994,
        kind="api",
        duration=585.309,
        params=(("code", "ThrottlingException"), ("operation", ""), ("probability", 1.0), ("service", "sqs")),
    ),
    Fault(at=102953.006, kind="manual_refresh", duration=0.0, params=(("masters", 1),)),
)


@pytest.mark.parametrize("schedule", [None, SHRUNK], ids=["seed", "shrunk"])
def test_resize_seed_363299_holds(schedule: tuple[Fault, ...] | None) -> None:
    result = run_seed(363299, 30, 2.0, schedule=schedule, profile=RESIZE)
    assert result.violation is None, result.summary()


@pytest.mark.parametrize(
    ("schedule", "node"),
    [
        (None, "ip-10-0-0-54.ec2.internal (i-9e97d9b65255e76f7)"),
        (SHRUNK, "ip-10-0-0-34.ec2.internal (i-44decbfb0a704ca47)"),  # fewer faults: other ids
    ],
    ids=["seed", "shrunk"],
)
def test_without_the_guard_the_slot_is_never_given_back(
    monkeypatch: pytest.MonkeyPatch, schedule: tuple[Fault, ...] | None, node: str
) -> None:
    def none(_self: Any) -> None:
        return None

    monkeypatch.setattr(ResultEngine, "guard", property(none))
    result = run_seed(363299, 30, 2.0, schedule=schedule, profile=RESIZE)
    assert result.violation is not None
    assert result.violation.invariant == "5 a drained node is cordoned at once"
    assert f"node {node} still schedulable" in result.violation.detail, result.violation.detail
