"""Which cordoned drain evicts next: at most ``slots`` drains evict at once, and a free slot goes to the waiting drain
with the earliest deadline (earliest deadline first; ties in arrival order).

A wave of Spot warnings gives every node the same two minutes, but a lifecycle-hook drain (up to the hook's timeout)
or a refresh drain (many minutes) may wait behind them: the one whose instance goes first drains first.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable
from datetime import datetime

POLL_SECONDS = 0.5  # how often a waiter looks at ``cancelled`` (hand-back on shutdown, a command taken over)


class DeadlineGate:
    """Admits at most ``slots`` holders; waiters are admitted earliest deadline first. Thread-safe.

    Args:
        slots: holders at once (>= 1; ``AGENT_CONCURRENCY``).
    """

    def __init__(self, slots: int) -> None:
        self.slots = max(1, slots)
        self._free = self.slots
        self._waiting: list[tuple[datetime, int]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()

    def acquire(self, deadline: datetime, cancelled: Callable[[], bool] = lambda: False) -> bool:
        """Wait for a slot, behind every waiter with an earlier deadline.

        Args:
            deadline: the drain's deadline (timezone-aware).
            cancelled: polled while waiting; when it turns True the wait ends without a slot.

        Returns:
            True with a slot held (``release`` it), False when ``cancelled`` ended the wait.
        """
        entry = (deadline, next(self._seq))
        with self._cond:
            heapq.heappush(self._waiting, entry)
            try:
                while not (self._free > 0 and self._waiting[0] == entry):
                    if cancelled():
                        return False
                    self._cond.wait(POLL_SECONDS)
                self._free -= 1
                return True
            finally:
                self._waiting.remove(entry)
                heapq.heapify(self._waiting)
                self._cond.notify_all()

    def release(self) -> None:
        """Give a slot back."""
        with self._cond:
            self._free = min(self.slots, self._free + 1)
            self._cond.notify_all()

    def waiting(self) -> int:
        """Drains waiting for a slot."""
        with self._cond:
            return len(self._waiting)

    def busy(self) -> int:
        """Slots held."""
        with self._cond:
            return self.slots - self._free
