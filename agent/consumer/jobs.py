"""What the consumer tracks: the jobs in flight (one per started command) and its event counts."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agent.consumer.decisions import tightened
from core.model import Command, CommandKind


@dataclass
class Job:
    """A command this worker started (``attempt``) from one SQS message (``receipt`` handle). ``command`` is what
    runs: a drain waiting for a slot may have it tightened (``tighten``) until it is handed to the engine
    (``begin_run``)."""

    message_id: str
    receipt: str
    command: Command
    attempt: int
    receive_count: int = 1  # the message's ApproximateReceiveCount when this worker took it
    handed_back: bool = False
    lost: bool = False  # another worker took the command over (seen by the heartbeat)
    ending: bool = False  # its end was claimed to be written (not handed back): it holds the command until removed
    lifecycle_beat_at: float = field(default_factory=time.monotonic)  # last lifecycle heartbeat (or the start)
    cordoned: Callable[[], None] = lambda: None  # gives back the message's hold on evictions (``CordonsFirst``)
    ends: bool = False  # its instance goes away at the deadline whatever the drain does (set by ``tighten`` too)
    _closed: bool = False
    _running: bool = False  # handed to the engine (``begin_run``): ``command`` no longer changes
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def begin_run(self) -> Command:
        """The command as it is handed to the engine now; from here on ``tighten`` leaves it alone (the engine's
        own ``DrainEngine.tighten`` takes over)."""
        with self._lock:
            self._running = True
            return self.command

    def tighten(self, item: Mapping[str, Any] | None) -> Command | None:
        """A drain not handed to the engine yet takes the deadline its ``CMD#`` ``item`` was tightened to
        (``decisions.tightened``: earlier deadline, ``uncordon_on_failure`` off). Returns the new command, or None
        when nothing changed (not a drain, already running, no earlier ``deadline_tightened_to``)."""
        with self._lock:
            if self._running or self.command.kind is not CommandKind.DRAIN:
                return None
            new = tightened(self.command, item)
            if new is self.command:
                return None
            self.command = new
            self.ends = True  # a Spot warning tightened it: the instance is being reclaimed
            return new

    @property
    def closed(self) -> bool:
        """The job's end was claimed (finished, or handed back)."""
        with self._lock:
            return self._closed

    def close(self) -> bool:
        """Claim the job's end (finish it, or hand it back); only the first caller gets True."""
        with self._lock:
            if self._closed:
                return False
            self._closed = True
            return True


class Counters:
    """Thread-safe event counts (``received``, ``malformed``, ``foreign``, ``duplicate``, ``succeeded`` ...)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def inc(self, name: str) -> None:
        with self._lock:
            self._counts[name] += 1

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)


class Jobs:
    """The jobs in flight, by command id (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[str, Job] = {}
        self._starting: dict[str, int] = {}  # command id -> starts under way (not yet a job)

    def add(self, job: Job) -> None:
        with self._lock:
            self._jobs[job.command.command_id] = job

    def remove(self, job: Job) -> None:
        """Forget ``job`` (only if it is still the one recorded for its command)."""
        with self._lock:
            if self._jobs.get(job.command.command_id) is job:
                del self._jobs[job.command.command_id]

    def get(self, command_id: str) -> Job | None:
        """The job in flight here for ``command_id``, if any."""
        with self._lock:
            return self._jobs.get(command_id)

    def holds(self, command_id: str) -> bool:
        """Whether a job for ``command_id`` is in flight here."""
        with self._lock:
            return command_id in self._jobs

    def begin_start(self, command_id: str) -> bool:
        """Note a start of ``command_id`` under way (a duplicate delivery may be handled by another thread at once);
        True when neither a job nor another start holds it here. Each call is paired with ``end_start``."""
        with self._lock:
            free = command_id not in self._jobs and command_id not in self._starting
            self._starting[command_id] = self._starting.get(command_id, 0) + 1
            return free

    def end_start(self, command_id: str) -> None:
        with self._lock:
            left = self._starting.get(command_id, 0) - 1
            if left > 0:
                self._starting[command_id] = left
            else:
                self._starting.pop(command_id, None)

    def list(self) -> list[Job]:
        with self._lock:
            return list(self._jobs.values())
