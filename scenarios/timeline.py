"""A scenario's timeline and verdict, printed for the operator reading the main job's output."""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import TextIO


@dataclass(frozen=True)
class Entry:
    at: float  # seconds since the timeline began
    actor: str  # who did or saw it: world, lambda, agent, asg, kubernetes
    what: str


@dataclass(frozen=True)
class Check:
    name: str  # e.g. "invariant 3: no instance terminated before its node was drained"
    passed: bool
    detail: str


@dataclass
class Timeline:
    """Thread-safe record of what happened, with times relative to ``start``.

    ``mark`` echoes each entry to ``progress`` as it happens (so a long step shows progress);
    ``print_timeline`` prints them all in time order to ``out`` at the end (entries taken from recorded
    timestamps, such as each pod's eviction time, land where they happened).
    """

    out: TextIO = field(default_factory=lambda: sys.stdout)
    progress: TextIO = field(default_factory=lambda: sys.stderr)
    start: float = field(default_factory=time.monotonic)
    wall_start: float = field(default_factory=time.time)
    entries: list[Entry] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def mark(self, actor: str, what: str, at: float | None = None) -> Entry:
        entry = Entry(round((time.monotonic() if at is None else at) - self.start, 3), actor, what)
        with self._lock:
            self.entries.append(entry)
            print(f"  ... {entry.at:8.3f}s  {actor:<10} {what}", file=self.progress, flush=True)
        return entry

    def mono(self, wall: datetime) -> float:
        """The monotonic-clock reading matching a wall-clock time (to place a recorded timestamp on the timeline)."""
        return self.start + (wall.timestamp() - self.wall_start)

    def first(self, prefix: str) -> Entry | None:
        with self._lock:
            return next((e for e in self.entries if e.what.startswith(prefix)), None)

    def check(self, name: str, passed: bool, detail: str = "") -> Check:
        result = Check(name, bool(passed), detail)
        with self._lock:
            self.checks.append(result)
        return result

    @property
    def ok(self) -> bool:
        return all(c.passed for c in self.checks)

    def summary(self) -> str:
        """``k/n checks passed``."""
        with self._lock:
            passed = sum(c.passed for c in self.checks)
            return f"{passed}/{len(self.checks)} checks passed"

    def print_timeline(self) -> None:
        print("\nTimeline (seconds since start)", file=self.out)
        with self._lock:
            entries = sorted(self.entries, key=lambda e: e.at)
        for e in entries:
            print(f"  {e.at:8.3f}s  {e.actor:<10} {e.what}", file=self.out)

    def print_verdict(self, headline: str | None = None) -> None:
        """Each check, then ``headline`` (default ``OK: n/n checks passed`` or ``BROKEN: k/n checks passed``; the
        runner gives ``ABORTED: ...`` or ``INTERRUPTED: ...`` when the scenario did not reach its end)."""
        print("\nVerdict", file=self.out)
        for c in self.checks:
            mark = "PASS" if c.passed else "FAIL"
            print(f"  [{mark}] {c.name}" + (f": {c.detail}" if c.detail else ""), file=self.out)
        cited = sorted({c.name.split(":")[0].split()[1] for c in self.checks if c.name.startswith("invariant ")})
        if cited:  # where a reader looks them up (a clone has docs/; anchors #invariant-N)
            where = ", ".join(f"docs/DESIGN.md#invariant-{n}" for n in cited)
            print(f"  (invariants: {where})", file=self.out)
        if headline is None:
            headline = f"{'OK' if self.ok else 'BROKEN'}: {self.summary()}"
        print(f"\n{headline}", file=self.out, flush=True)


def logged_actions(log_text: str) -> list[tuple[str, datetime]]:
    """The action lines of a Lambda's JSON log (``lambdas.common.execute`` logs each action as it is applied, message
    ``<description>: <result>`` with an ``action`` key), with the time each was logged (Powertools' ``timestamp``,
    ``2026-12-02 04:35:33,608+0000``), in order. Lines that are not JSON, or not actions, are skipped."""
    found: list[tuple[str, datetime]] = []
    for line in log_text.splitlines():
        try:
            record = json.loads(line)
            if not isinstance(record, dict) or "action" not in record:
                continue
            found.append((str(record["message"]), datetime.strptime(record["timestamp"], "%Y-%m-%d %H:%M:%S,%f%z")))
        except (ValueError, KeyError, TypeError):
            continue
    return found


def stamp_actions(descriptions: list[str], log_text: str) -> list[datetime | None]:
    """For each action description of a Lambda's response, in order, the time its log line says it was applied
    (None when no line matches): a timeline then places the Lambda's actions where they happened, not at the
    handler's return, so an effect seen by a watcher never precedes its cause."""
    logged = logged_actions(log_text)
    out: list[datetime | None] = []
    for description in descriptions:
        index = next((i for i, (message, _) in enumerate(logged) if message.startswith(f"{description}: ")), None)
        out.append(None if index is None else logged.pop(index)[1])
    return out
