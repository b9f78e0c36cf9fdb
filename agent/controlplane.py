"""The cluster-wide control-plane drain cap: ``agent.drain.guard``'s rules with slots kept in the table.

Why the table: at most ``MAX_CONTROL_PLANE_DRAINS`` control-plane drains must run at once in the cluster, not in
one agent process. Two processes can run commands at the same time (a standby taking over from a leader that is
still finishing, a stale command taken over, two deployments by mistake), and a count of ``running`` ``CMD#`` items
read then acted on lets two of them both see a free slot. A slot is instead one ``CPDRAIN#<n>`` item
(``adapters.dynamo.controlplane``) taken by one conditional put (free, expired, or already this command's), so two
claimers of the last slot cannot both win. A slot expires at the drain's deadline (capped to
``MAX_COMMAND_SECONDS`` from the claim, as the drain itself is), so a worker that dies holding one blocks the
control plane at most that long; the command's next worker (same command id) takes the same slot over at once, and
the worker it took the command from gives back only a slot still under its own name (its drain, ending late, must
not free the slot of a drain of that master still running elsewhere).
A slot stays with its command while the command is retried or handed back after a retryable error (so no other
master's drain starts while this one is half done, its node cordoned) and is given back when the command ends
(``DrainEngine.run`` returning, the consumer finishing it).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Protocol

from adapters.dynamo.controlplane import SlotClaim
from agent.drain.guard import busy, refuse_unless_allowed
from agent.kube.views import NodeView
from core.model import Command, utcnow

log = logging.getLogger(__name__)


class Slots(Protocol):
    """What the guard needs of ``adapters.dynamo.controlplane.ControlPlaneSlots``."""

    def claim(
        self, command_id: str, instance_id: str, worker: str, slots: int, expires_at: datetime, now: datetime
    ) -> SlotClaim: ...

    def release(self, command_id: str, worker: str | None = None) -> int: ...


class TableControlPlaneGuard:
    """Admits commands on control-plane nodes with cluster-wide slots (``agent.drain.guard.ControlPlaneGuard``).

    Args:
        slots: the table's slots (``ControlPlaneSlots``).
        limit: ``MAX_CONTROL_PLANE_DRAINS`` (0 refuses every control-plane drain).
        worker: this process (recorded in the slot).
        max_command_seconds: ``MAX_COMMAND_SECONDS``: a slot expires at most this long after it is claimed.
        clock: current UTC time.
        on_error: called with an error ``release`` swallowed (counts it).
    """

    def __init__(
        self,
        slots: Slots,
        limit: int,
        worker: str,
        max_command_seconds: int,
        clock: Callable[[], datetime] = utcnow,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.slots = slots
        self.limit = limit
        self.worker = worker
        self.max_command_seconds = max_command_seconds
        self.clock = clock
        self.on_error = on_error
        self._held: set[str] = set()
        self._lock = threading.Lock()

    def admit(self, command: Command, node: NodeView) -> None:
        """See ``ControlPlaneGuard.admit``. Raises ``StoreUnavailableError`` when the table cannot be reached."""
        if not refuse_unless_allowed(command, node, self.limit):
            return
        now = self.clock()
        expires = min(command.deadline, now + timedelta(seconds=self.max_command_seconds))
        got = self.slots.claim(command.command_id, command.instance_id, self.worker, self.limit, expires, now)
        if got.ignored:
            log.warning(
                "items under the control-plane drain slots' prefix that are no slot ignored command_id=%s items=%s",
                command.command_id,
                list(got.ignored),
            )
        if got.slot is None:
            raise busy(node, self.limit, list(got.holders))
        with self._lock:
            self._held.add(command.command_id)
        log.info("control-plane drain slot %d taken command_id=%s node=%s", got.slot, command.command_id, node.name)

    def release(self, command_id: str) -> None:
        with self._lock:
            if command_id not in self._held:
                return
        try:
            self.slots.release(command_id, self.worker)  # not a slot the command's next worker renewed
        except Exception as err:  # noqa: BLE001 - release never raises; the slot expires at the drain's deadline anyway
            if self.on_error is not None:
                self.on_error(err)
            log.warning("could not give back the control-plane drain slot command_id=%s: %s", command_id, err)
            return  # still held: the next release of the command (the consumer's, after the engine's) tries again
        with self._lock:
            self._held.discard(command_id)
