"""A Spot drain command as the interruption Lambda records it, for the agent's pure tests."""

from __future__ import annotations

from datetime import timedelta

from core.model import Command, utcnow

NOW = utcnow()


def spot_command(kind: str = "drain", cluster: str = "demo", deadline_in: float = 120) -> Command:
    """``kind`` on ``i-0123456789abcdef0`` for ``cluster``, due ``deadline_in`` seconds after ``NOW``."""
    return Command(
        command_id="spot-1",
        cluster=cluster,
        kind=kind,
        instance_id="i-0123456789abcdef0",
        node_name="ip-10-0-1-17.ec2.internal",
        reason="spot interruption warning",
        deadline=NOW + timedelta(seconds=deadline_in),
    )
