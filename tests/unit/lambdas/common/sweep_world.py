"""What the command sweeper's tests share (``test_sweep.py``, ``test_sweep_refusals.py``): the time they start from,
a drain command, and the sweeper's sender and log, recording what they are given."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from core.model import Command, CommandKind, utcnow

NOW = utcnow()


def drain(command_id: str, deadline_in: float = 600) -> Command:
    """A drain of ``i-0123456789abcdef0`` whose deadline is ``deadline_in`` seconds after ``NOW``."""
    return Command(
        command_id=command_id,
        cluster="demo",
        kind=CommandKind.DRAIN,
        instance_id="i-0123456789abcdef0",
        node_name="n1",
        reason="test",
        deadline=NOW + timedelta(seconds=deadline_in),
    )


class Sender:
    """The sweeper's queue port: keeps each command sent, answers a message id."""

    def __init__(self) -> None:
        self.sent: list[Command] = []

    def send_command(self, command: Command) -> str:
        self.sent.append(command)
        return f"m-{len(self.sent)}"


class Log:
    """The sweeper's logger: keeps each line, whatever its level."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def warning(self, message: str, **_: Any) -> None:
        self.lines.append(message)

    info = error = warning
