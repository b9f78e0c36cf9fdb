"""One entry of a fault schedule (``sim.schedules.Fault``) written as the tests write it: time, kind, duration and
its parameters by name (kept sorted, as the schedules keep them)."""

from __future__ import annotations

from sim.schedules import Fault


def entry(at: float, kind: str, duration: float = 0.0, **params: str | int | float) -> Fault:
    return Fault(at, kind, duration, tuple(sorted(params.items())))
