"""What the agent does to a control-plane node, and how many it drains at once.

A control-plane node is drained (or cordoned) only when its instance goes anyway or an operator's refresh replaces it:

- a refresher master step (``Command.reason`` "refresh <run> step <n>", ``REFRESH_REASON_PREFIX``: the refresher
  drains a master only as the step that replaces it, one master at a time, every master Ready first);
- a deadline-bound interruption of that very node (``DEADLINE_BOUND_REASONS``: a Spot warning, a termination
  lifecycle hook). The engine finds the node by the providerID of the command's own instance, so the interruption
  is always the node's own.

Any other drain or cordon of a control-plane node (a rebalance recommendation, a replenisher's drain, anything a
record carries with another reason) is refused: ``ControlPlaneRefusedError``, the node untouched, the command
``failed``. An uncordon is always allowed (it gives back our own cordon only).

At most ``MAX_CONTROL_PLANE_DRAINS`` drains of control-plane nodes run at once (``ControlPlaneGuard.admit`` claims a
slot, kept through retries and hand-backs; ``release`` gives it back when the command ends). One more is not
failed: ``ControlPlaneBusyError`` (retryable) leaves the node untouched, and the consumer tries again later within
the command's deadline (``agent.consumer.worker``). ``LocalControlPlaneGuard`` counts the drains of one process (an
engine used on its own, tests); the agent uses ``agent.controlplane.TableControlPlaneGuard``, whose slots are items
of the cluster's table and so hold for the whole cluster.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Protocol

from agent.drain.policy import DEADLINE_BOUND_REASONS, is_control_plane
from agent.kube.views import NodeView
from core.exceptions import ControlPlaneBusyError, ControlPlaneRefusedError
from core.model import Command, CommandKind

# The refresher's command reason (lambdas.refresher.decide.context.Context.command: "refresh <run id> step <n>").
REFRESH_REASON_PREFIX = "refresh "


def control_plane_refusal(command: Command, node_name: str, labels: Mapping[str, str]) -> str | None:
    """Why ``command`` may not touch the node (``labels``: its metadata.labels), None when it may. Pure.

    >>> from datetime import datetime, timezone
    >>> cmd = Command(command_id="c", cluster="k", kind="drain", instance_id="i-0123456789abcdef0",
    ...               reason="rebalance-recommendation",
    ...               deadline=datetime(2030, 1, 1, tzinfo=timezone.utc))
    >>> master = {"node-role.kubernetes.io/control-plane": ""}
    >>> control_plane_refusal(cmd, "m1", master) is not None
    True
    >>> control_plane_refusal(cmd.model_copy(update={"reason": "asg-lifecycle:masters"}), "m1", master) is None
    True
    """
    if command.kind is CommandKind.UNCORDON or not is_control_plane(labels):
        return None
    if command.reason.startswith(REFRESH_REASON_PREFIX) or command.reason.startswith(DEADLINE_BOUND_REASONS):
        return None
    return (
        f"refused: {node_name} is a control-plane node, drained or cordoned only for a refresher master step or a "
        f"Spot warning or lifecycle hook of its own instance (reason {command.reason!r}); node left as it was"
    )


class ControlPlaneGuard(Protocol):
    """Admits commands on control-plane nodes (see the module docstring)."""

    def admit(self, command: Command, node: NodeView) -> None:
        """Before ``command`` touches the control-plane ``node``: judge it, and for a drain take a slot (again, when
        the command already holds one: idempotent).

        Raises:
            ControlPlaneRefusedError: not for this command (final). ControlPlaneBusyError: every slot is held.
            RetryableError: the slots could not be read or written.
        """
        ...

    def release(self, command_id: str) -> None:
        """Give back the slot ``command_id`` holds, if any. Never raises."""
        ...


def refuse_unless_allowed(command: Command, node: NodeView, limit: int) -> bool:
    """Raise ``ControlPlaneRefusedError`` unless ``command`` may touch ``node``; True when it needs a slot (a drain
    of a control-plane node)."""
    why = control_plane_refusal(command, node.name, node.labels)
    if why is not None:
        raise ControlPlaneRefusedError(why)
    if command.kind is not CommandKind.DRAIN or not is_control_plane(node.labels):
        return False
    if limit <= 0:
        raise ControlPlaneRefusedError(
            f"refused: {node.name} is a control-plane node and MAX_CONTROL_PLANE_DRAINS=0; node left as it was"
        )
    return True


def busy(node: NodeView, limit: int, holders: list[str]) -> ControlPlaneBusyError:
    """The error of a control-plane drain that must wait for a slot."""
    return ControlPlaneBusyError(
        f"control-plane node {node.name}: {limit} control-plane drain(s) already run "
        f"(MAX_CONTROL_PLANE_DRAINS; held by {', '.join(holders) or '?'}); handed back, node left as it was",
        holders,
    )


class LocalControlPlaneGuard:
    """Slots counted in this process only (thread-safe). ``limit``: ``MAX_CONTROL_PLANE_DRAINS``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._holders: set[str] = set()
        self._lock = threading.Lock()

    def admit(self, command: Command, node: NodeView) -> None:
        if not refuse_unless_allowed(command, node, self.limit):
            return
        with self._lock:
            if command.command_id in self._holders or len(self._holders) < self.limit:
                self._holders.add(command.command_id)
                return
            holders = sorted(self._holders)
        raise busy(node, self.limit, holders)

    def release(self, command_id: str) -> None:
        with self._lock:
            self._holders.discard(command_id)
