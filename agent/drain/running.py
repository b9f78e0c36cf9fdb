"""The drains one engine runs now (``DrainEngine``): each one's deadline, node and flags, by command id.

``DrainEngine.tighten`` finds a drain here to bring its deadline forward (a Spot warning), and an uncordon command
leaves a cordon whose annotation names a drain found here (``agent.drain.cordon.decide_uncordon``: that cordon is the
drain's, and the drain's own end decides whether it is given back). Thread-safe.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from core.clock import Deadline


@dataclass
class RunningDrain:
    """A drain in progress: its deadline and node; ``bound`` once it deletes pods a PodDisruptionBudget still protects
    when their grace stops fitting (``agent.drain.policy.deletes_past_pdb``); ``ending`` once a Spot warning tightened
    it to the instance's end (``DrainEngine.tighten``): it then never gives its cordon back, which it marks ending."""

    deadline: Deadline
    node: str = ""
    bound: threading.Event = field(default_factory=threading.Event)
    ending: threading.Event = field(default_factory=threading.Event)


class RunningDrains:
    """The drains in progress of one engine, by command id (thread-safe)."""

    def __init__(self) -> None:
        self._by_id: dict[str, RunningDrain] = {}
        self._lock = threading.Lock()

    def add(self, command_id: str, drain: RunningDrain) -> None:
        """Record ``drain`` as the one of ``command_id`` in progress (replacing any other under that id)."""
        with self._lock:
            self._by_id[command_id] = drain

    def remove(self, command_id: str) -> None:
        """The drain of ``command_id`` ended (nothing happens if none is recorded)."""
        with self._lock:
            self._by_id.pop(command_id, None)

    def get(self, command_id: str) -> RunningDrain | None:
        """The drain of ``command_id`` in progress, None when none is."""
        with self._lock:
            return self._by_id.get(command_id)

    def ids(self) -> frozenset[str]:
        """The command ids of the drains in progress, as of now."""
        with self._lock:
            return frozenset(self._by_id)

    @contextmanager
    def holding(self, command_id: str, drain: RunningDrain | None) -> Iterator[None]:
        """``drain`` recorded as the one of ``command_id`` in progress for the block, then removed (however the block
        ends); None records nothing."""
        if drain is not None:
            self.add(command_id, drain)
        try:
            yield
        finally:
            if drain is not None:
                self.remove(command_id)
