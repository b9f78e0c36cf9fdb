"""What the interruption Lambda keeps of an instance's ``CMD#`` items (``handler.readable_commands``): the agent
partition is written by more than this Lambda, and an item the rules cannot read is left out, logged and counted,
instead of failing every notice for the instance."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from lambdas.interruption.decide import decide
from lambdas.interruption.decide.common import unreadable_command
from lambdas.interruption.handler import readable_commands
from lambdas.interruption.plan import RecordCommand, SendCommand
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
