"""Which cordoned drain evicts next: at most ``slots`` drains evict at once, and a free slot goes to the waiting drain
with the earliest deadline (earliest deadline first; ties in arrival order). And when: not before every command
received so far has had its node cordoned (``CordonsFirst``), so no pod evicted by the first drains of a wave is
placed onto a node warned in the same wave whose cordon is still being written.

A wave of Spot warnings gives every node the same two minutes, but a lifecycle-hook drain (up to the hook's timeout)
or a refresh drain (many minutes) may wait behind them: the one whose instance goes first drains first.

The slots bound drains that can wait. A drain whose instance goes away at its deadline whatever the drain does (a Spot
interruption, a termination lifecycle action, a drain a Spot warning tightened) and whose deadline is near
(``DRAIN_URGENT_SECONDS``) is admitted at once, over the bound: waiting could only leave its pods to be killed with
the instance. A drain mostly waits for its pods' grace periods, so a slot held that way is no measure of the load it
puts on the API server; that load is bounded by the agent's Kubernetes request rate and requests in flight, and the
number of drains at once by ``AGENT_MAX_IN_FLIGHT``. Before this, a wave of 200 warnings with 64 slots and pods of 60 s
grace left 72 drains to start after their two minutes were over.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable, Hashable
from datetime import datetime
from typing import Any

POLL_SECONDS = 0.5  # how often a waiter looks at ``cancelled`` (hand-back on shutdown, a command taken over)
# The longest a cordoned drain waits for the cordons of the commands received with or after it before it evicts. A
# cordon is a read of the command's record, its start and one node patch (tens of milliseconds; a few seconds on a
# loaded apiserver or table); a cordon held up longer (retried errors) does not hold the other drains up: each ends
# by its deadline, two minutes for a Spot warning.
CORDONS_FIRST_MAX_SECONDS = 5.0


class CordonsFirst:
    """Evictions wait while a received command's cordon is still to be written (bounded by ``max_seconds``).

    The receive loop takes a ``hold`` per message as it is received, before any of them is worked; the worker gives
    it back once the command's node is cordoned (or the command needs no cordon, or will not run); a drain then
    ``wait``s before its evictions. Thread-safe.
    """

    def __init__(self, max_seconds: float = CORDONS_FIRST_MAX_SECONDS) -> None:
        self.max_seconds = max_seconds
        self._pending = 0
        self._waiters = 0
        self._cond = threading.Condition()

    def hold(self) -> Callable[[], None]:
        """One more cordon to wait for; returns its release (idempotent: only its first call counts)."""
        with self._cond:
            self._pending += 1
        released = threading.Event()

        def release() -> None:
            with self._cond:
                if released.is_set():
                    return
                released.set()
                self._pending -= 1
                self._cond.notify_all()

        return release

    def wait(self, cancelled: Callable[[], bool] = lambda: False) -> bool:
        """Wait until no cordon is held, ``max_seconds`` at most (or until ``cancelled`` turns True); True when none
        is held any more, False when the wait ended with some still held."""
        end = time.monotonic() + self.max_seconds
        with self._cond:
            self._waiters += 1
            try:
                while self._pending > 0 and not cancelled():
                    left = end - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(min(left, POLL_SECONDS))
                return self._pending == 0
            finally:
                self._waiters -= 1

    def pending(self) -> int:
        """Cordons held."""
        with self._cond:
            return self._pending

    def waiting(self) -> int:
        """Drains waiting for them."""
        with self._cond:
            return self._waiters


class DeadlineGate:
    """Admits at most ``slots`` holders; waiters are admitted earliest deadline first (a waiter's deadline may be
    brought forward while it waits: ``retarget``), and a waiter that turns ``urgent`` at once, over the bound (the
    module docstring). Thread-safe.

    Args:
        slots: holders at once of the drains that can wait (>= 1; ``AGENT_CONCURRENCY``).
    """

    def __init__(self, slots: int) -> None:
        self.slots = max(1, slots)
        self._held = 0  # holders now, urgent ones included (may exceed ``slots``)
        self._waiting: list[list[Any]] = []  # heap of [deadline, arrival number]
        self._keyed: dict[Hashable, list[Any]] = {}  # key -> its waiter's entry (``retarget``)
        self._seq = itertools.count()
        self._cond = threading.Condition()

    def acquire(
        self,
        deadline: datetime,
        cancelled: Callable[[], bool] = lambda: False,
        key: Hashable | None = None,
        urgent: Callable[[], bool] = lambda: False,
        over_bound: list[bool] | None = None,
    ) -> bool:
        """Wait for a slot, behind every waiter with an earlier deadline, unless ``urgent``.

        Args:
            deadline: the drain's deadline (timezone-aware).
            cancelled: polled while waiting (at least every ``POLL_SECONDS``); when it turns True the wait ends
                without a slot. The worker's ends the wait at the drain's deadline too (invariant 8).
            key: names this waiter for ``retarget`` (the command id); None: never moved.
            urgent: polled as ``cancelled`` is (under the gate's lock: it must not call the gate); when True the
                waiter is admitted at once, whatever the slots held (``urgent_drain``).
            over_bound: a list that gets ``True`` appended when the waiter was admitted with every slot held.

        Returns:
            True with a slot held (``release`` it), False when ``cancelled`` ended the wait.
        """
        entry: list[Any] = [deadline, next(self._seq)]
        with self._cond:
            heapq.heappush(self._waiting, entry)
            if key is not None:
                self._keyed[key] = entry
            try:
                while not (self._held < self.slots and self._waiting[0] is entry):
                    if cancelled():
                        return False
                    if urgent():
                        if self._held >= self.slots and over_bound is not None:
                            over_bound.append(True)
                        break
                    self._cond.wait(POLL_SECONDS)
                self._held += 1
                return True
            finally:
                self._waiting = [e for e in self._waiting if e is not entry]
                heapq.heapify(self._waiting)
                if key is not None and self._keyed.get(key) is entry:
                    del self._keyed[key]
                self._cond.notify_all()

    def retarget(self, key: Hashable, deadline: datetime) -> bool:
        """Move the waiter ``key`` to its new ``deadline`` (a drain's deadline tightened while it waits: it keeps
        its arrival number for ties). False when no waiter has that key."""
        with self._cond:
            entry = self._keyed.get(key)
            if entry is None:
                return False
            entry[0] = deadline
            heapq.heapify(self._waiting)
            self._cond.notify_all()
            return True

    def release(self) -> None:
        """Give a slot back."""
        with self._cond:
            self._held = max(0, self._held - 1)
            self._cond.notify_all()

    def waiting(self) -> int:
        """Drains waiting for a slot."""
        with self._cond:
            return len(self._waiting)

    def busy(self) -> int:
        """Slots held (urgent holders over the bound included)."""
        with self._cond:
            return self._held


def urgent_drain(ends: bool, deadline: datetime, now: datetime, within_seconds: float) -> bool:
    """Whether a drain waiting for a slot is admitted at once (pure): its instance ``ends`` at its ``deadline``
    whatever the drain does (``agent.drain.policy.instance_ends``, or a Spot warning tightened it) and the deadline is
    at most ``within_seconds`` away (``DRAIN_URGENT_SECONDS``; 0: never). A Spot warning's drain is urgent from its
    start (two minutes); a lifecycle action's drain with a longer timeout waits its turn until then."""
    return ends and within_seconds > 0 and (deadline - now).total_seconds() <= within_seconds
