"""What the interruption Lambda keeps of an instance's ``CMD#`` items (``handler.readable_commands``): the agent
partition is written by more than this Lambda, and an item the rules cannot read is left out, logged and counted,
instead of failing every notice for the instance; the notice's own item (``World.command``) alike, which the decision
skips (``command_unreadable``) and the executor counts."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from lambdas.interruption.decide import Plan, decide
from lambdas.interruption.decide.common import unreadable_command
from lambdas.interruption.execute import execute
from lambdas.interruption.handler import readable_commands
from lambdas.interruption.plan import RecordCommand, SendCommand, Skip, SkipReason
from tests.unit.lambdas.interruption.decision_world import INSTANCE, T0, member, settings, spot, world

GOOD = {
    "sk": "CMD#rebalance-1",
    "kind": "cordon",
    "instance_id": INSTANCE,
    "status": "succeeded",
    "finished_at": T0.isoformat(),
    "command": {"command_id": "rebalance-1", "options": {"uncordon_after_seconds": 300}},
}
UNREADABLE = [
    {**GOOD, "command": "garbage"},
    {**GOOD, "command": {"command_id": "rebalance-1", "options": ["x"]}},
    {**GOOD, "status": ["succeeded"]},
    {**GOOD, "finished_at": "bogus"},
    {**GOOD, "finished_at": T0.replace(tzinfo=None).isoformat()},
]


class Counted:
    def __init__(self) -> None:
        self.counted: list[tuple[str, str, str]] = []

    def count_by(self, name: str, dimension: str, value: str) -> None:
        self.counted.append((name, dimension, value))


@pytest.mark.parametrize("item", UNREADABLE)
def test_an_item_the_rules_cannot_read_is_left_out_and_counted(item: dict[str, Any]) -> None:
    telemetry = Counted()
    deps: Any = SimpleNamespace(telemetry=telemetry)
    assert unreadable_command(item) and unreadable_command(GOOD) is None
    assert readable_commands([item, GOOD], deps) == (GOOD,)
    assert telemetry.counted == [("Skipped", "reason", "unreadable_item")]


def test_a_spot_warning_is_decided_without_them() -> None:
    deps: Any = SimpleNamespace(telemetry=Counted())
    now = T0 + timedelta(seconds=3)
    spotted = replace(world(membership=member(now)), commands=readable_commands(UNREADABLE, deps))
    plan = decide(spot(), now, settings(), spotted)
    assert [type(a) for a in plan.actions][:2] == [RecordCommand, SendCommand]


OWN_UNREADABLE = [
    {"sk": "CMD#spot-ev-1", "status": "queued", "command": "garbage"},
    {"sk": "CMD#spot-ev-1", "status": "queued"},
    {"sk": "CMD#spot-ev-1", "status": "queued", "command": {"command_id": "spot-ev-1"}},
    {"sk": "CMD#spot-ev-1", "status": "queued", "command": {**GOOD["command"], "command_id": "spot-ev-1"}},
]


@pytest.mark.parametrize("item", OWN_UNREADABLE)
def test_a_warning_whose_own_item_is_unreadable_is_decided_not_raised(item: dict[str, Any]) -> None:
    """The notice's own ``CMD#`` item (``World.command``) is in the agent partition too: one the agent's role wrote
    (or a version that records commands another way) must not fail every delivery of the warning. It is not sent
    again (the agent runs only what a record backs, and this record backs nothing it can read); the early
    replacement still goes ahead."""
    now = T0 + timedelta(seconds=3)
    spotted = replace(world(membership=member(now)), command=item)
    plan = decide(spot(), now, settings(), spotted)
    kinds = [type(a).__name__ for a in plan.actions]
    assert "SendCommand" not in kinds and "RecordCommand" not in kinds
    assert kinds[-3:] == ["RecordDetach", "DetachInstance", "MarkDetached"]


def test_the_unreadable_own_item_is_counted_and_logged_as_the_others_are() -> None:
    telemetry = Counted()
    logged: list[str] = []
    effects: Any = SimpleNamespace(
        telemetry=telemetry,
        logger=SimpleNamespace(warning=lambda msg, **_: logged.append(msg), info=lambda msg, **_: None),
    )
    skip = Skip("command", SkipReason.COMMAND_UNREADABLE, "no command")
    assert execute(Plan((skip,)), effects, T0) == [{"action": skip.describe(), "result": "skipped"}]
    assert telemetry.counted == [("Skipped", "reason", "unreadable_item")] and logged
