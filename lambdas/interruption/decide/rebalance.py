"""Rebalance recommendations and what follows them (rules 5 and 5a of the package docstring). Pure.

A rebalance command carries ``options.uncordon_after_seconds`` (``REBALANCE_QUIET_SECONDS``): the agent gives its
cordon back after that quiet period unless something followed (``agent.cordons``). Whatever follows for the
instance (a Spot warning, a lifecycle action, a state change) marks it resolved here (``ResolveCordon``), so the
agent never gives that cordon back; the agent also checks for later commands itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from core.model import CommandKind, CommandStatus
from lambdas.interruption.decide.common import ACTIVE, command_id
from lambdas.interruption.plan import Acknowledge, IgnoreReason, ResolveCordon

# statuses of a command that may still hold its cordon (skipped: no node; failed: refused before or while cordoning)
HOLDING = (*ACTIVE, CommandStatus.SUCCEEDED.value, CommandStatus.TIMED_OUT.value)


def releasable(item: Mapping[str, Any]) -> bool:
    """True for a ``CMD#`` item whose cordon the agent gives back after a quiet period and that nothing resolved
    yet (``options.uncordon_after_seconds`` set, no ``resolution``)."""
    options = (item.get("command") or {}).get("options") or {}
    return options.get("uncordon_after_seconds") is not None and not item.get("resolution")


def in_effect(item: Mapping[str, Any]) -> bool:
    """A releasable command that is active or still holds its cordon."""
    return releasable(item) and item.get("status") in HOLDING


def duplicate_rebalance(own_id: str, commands: Iterable[Mapping[str, Any]]) -> Acknowledge | None:
    """Rule 5a: a rebalance recommendation for an instance that a drain is already emptying, or whose earlier
    rebalance command is still in effect, changes nothing (a second cordon would restart the quiet period; a second
    drain would race the first)."""
    others = [c for c in commands if command_id(c) != own_id]
    draining = next((c for c in others if c.get("kind") == CommandKind.DRAIN.value and c.get("status") in ACTIVE), None)
    if draining is not None:
        return Acknowledge(IgnoreReason.ALREADY_DRAINING, f"drain {command_id(draining)} is {draining['status']}")
    earlier = next((c for c in others if in_effect(c)), None)
    if earlier is not None:
        return Acknowledge(
            IgnoreReason.REBALANCE_IN_EFFECT, f"{command_id(earlier)} ({earlier['status']}) still holds the node"
        )
    return None


def active_rebalance_drain(commands: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The instance's queued or running drain that a rebalance recommendation started, if any (a Spot warning
    tightens it instead of starting a second drain)."""
    return next(
        (
            c
            for c in commands
            if c.get("kind") == CommandKind.DRAIN.value
            and c.get("status") in ACTIVE
            and str(c.get("command", {}).get("reason", "")).startswith("rebalance")
        ),
        None,
    )


def resolve_all(commands: Iterable[Mapping[str, Any]], resolution: str, skip: str = "") -> list[ResolveCordon]:
    """``ResolveCordon`` for every releasable command of the instance (but ``skip``) whose cordon is or may be
    held: something followed the recommendation, so the cordon stays."""
    return [
        ResolveCordon(command_id(c), resolution)
        for c in commands
        if releasable(c) and c.get("status") in HOLDING and command_id(c) != skip
    ]
