"""What a chart shows, as plain values (no plotting library): instance rows made of phases, and Ready nodes per pool.

Times are seconds since the chart's origin (a run's ``created_at``, a scenario's start). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum


class Phase(str, Enum):
    """What an instance is going through (one bar colour each)."""

    LAUNCH = "launch"  # launched (or capacity asked for it), its node not Ready yet
    READY = "ready"  # node Ready, schedulable
    SURGE = "surge"  # an old instance whose refresh step raised desired capacity and waits for the spare
    CORDONED = "cordoned"  # node cordoned, no drain running
    DRAIN = "drain"  # drain asked or running (the agent cordons, then evicts)
    DRAINED = "drained"  # drain over, the instance still there
    TERMINATE = "terminate"  # termination asked, the instance not gone yet
    SETTLE = "settle"  # a replaced master: the run checks every master is Ready, twice
    UNDO = "undo"  # a refresh step giving its surge back
    NOT_READY = "not_ready"  # the node was Ready once and is not now (or is gone before the instance)


@dataclass(frozen=True)
class Span:
    phase: Phase
    start: float
    end: float


@dataclass(frozen=True)
class Marker:
    what: str  # e.g. "Ready", "cordoned", "left group", "done"
    at: float


@dataclass
class InstanceRow:
    """One instance: its phases one after the other (``spans``, not overlapping) and its moments (``markers``)."""

    instance_id: str
    label: str
    spans: list[Span] = field(default_factory=list)
    markers: list[Marker] = field(default_factory=list)


@dataclass
class PoolSeries:
    """Ready nodes of one pool (an ASG, so one AZ in kOps' layout) over time: a step function, each point
    ``(seconds, Ready nodes)`` holding until the next."""

    pool: str
    points: list[tuple[float, int]] = field(default_factory=list)


@dataclass
class Chart:
    """The picture's data.

    Attributes:
        title: first line of the picture. note: where the data comes from (printed under the capacity panel).
        origin: the wall-clock time of second 0 (UTC), shown in the axis label; None when unknown.
        end: the last second shown (bars still open at the end are drawn up to it).
        start: the first second shown (a scenario's chart starts shortly before the system first acted).
    """

    title: str
    rows: list[InstanceRow]
    pools: list[PoolSeries]
    end: float
    origin: datetime | None = None
    note: str = ""
    start: float = 0.0


def sequence(events: Iterable[tuple[float | None, Phase | None]], end: float) -> list[Span]:
    """Consecutive spans from events ``(seconds, phase the instance enters)``: each phase lasts until the next event
    (``None`` as phase: the instance is gone, nothing drawn after it) or ``end``. Events without a time are left out;
    events at one time keep their order; spans of no length are dropped, and a phase that follows itself is one span.

    >>> sequence([(0.0, Phase.READY), (5.0, Phase.DRAIN), (9.0, None)], 20.0)[1]
    Span(phase=<Phase.DRAIN: 'drain'>, start=5.0, end=9.0)
    """
    timed = sorted(((t, p) for t, p in events if t is not None), key=lambda e: e[0])
    spans: list[Span] = []
    for i, (start, phase) in enumerate(timed):
        if phase is None:
            continue
        stop = timed[i + 1][0] if i + 1 < len(timed) else max(end, start)
        if stop <= start:
            continue
        if spans and spans[-1].phase is phase and spans[-1].end == start:  # one bar for a phase entered twice
            spans[-1] = Span(phase, spans[-1].start, stop)
        else:
            spans.append(Span(phase, start, stop))
    return spans


def steps(start: int, changes: Iterable[tuple[float | None, int]], t0: float = 0.0) -> list[tuple[float, int]]:
    """A step function from ``start`` at ``t0`` and ``(seconds, +n/-n)`` changes (those without a time are left out):
    one point per distinct time, in time order.

    >>> steps(2, [(3.0, 1), (7.0, -1), (7.0, 0)])
    [(0.0, 2), (3.0, 3), (7.0, 2)]
    """
    points = [(t0, start)]
    value = start
    for at, delta in sorted(((t, d) for t, d in changes if t is not None), key=lambda c: c[0]):
        value += delta
        if points[-1][0] == at:
            points[-1] = (at, value)
        else:
            points.append((at, value))
    return points
