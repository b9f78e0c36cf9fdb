"""Injected faults the in-memory services consult before answering a call (seeded, so replayable).

A ``Faults`` holds windows of simulated time in which calls of a service (and optionally one operation) fail with
an error code (``ThrottlingException``, ``ServiceUnavailable``, ``InternalError``, ...) with some probability. Each
in-memory service asks ``check(service, operation)`` at the start of a call and, when it answers a code, raises
the error that service raises for it (shaped as the real service's, so the product's adapters translate it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sim.kernel import Kernel


@dataclass(frozen=True)
class FaultWindow:
    """Calls of ``service`` (``autoscaling``, ``ec2``, ``sqs``, ``dynamodb``, ``kube``, ``events``) whose operation
    starts with ``operation`` ("" = all) fail with ``code`` with ``probability`` while ``start <= t < end``."""

    service: str
    operation: str
    start: float
    end: float
    code: str
    probability: float = 1.0


class Faults:
    """The run's fault windows.

    Args:
        kernel: the simulation's kernel (time and the ``faults`` random stream).
    """

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.windows: list[FaultWindow] = []
        self.injected: dict[str, int] = {}
        self._rng = kernel.stream("faults")
        self._quiet = math.inf  # no window is active before this simulated second (``check``)

    def add(self, window: FaultWindow) -> None:
        self.windows.append(window)
        self._quiet = min(self._quiet, window.start)

    def check(self, service: str, operation: str) -> str | None:
        """The error code this call fails with now, or None to answer normally.

        Nearly every call comes while no window is active (a week has a few dozen windows of minutes): before
        ``_quiet``, the earliest start among the windows not ended at the last walk (or added since), none can be, and
        the answer is None without a walk and without a draw, as ``check_all``'s walk would answer. From ``_quiet`` on,
        each call walks (``check_all``) and moves ``_quiet`` on; the kernel's time never goes back.
        """
        t = self.kernel.t
        if t < self._quiet:
            return None
        self._quiet = min((w.start for w in self.windows if w.end > t), default=math.inf)
        return self.check_all(service, operation)

    def check_all(self, service: str, operation: str) -> str | None:
        """``check`` by a walk over every window (the general path; ``tests/unit/sim/test_faults.py`` compares)."""
        t = self.kernel.t
        for w in self.windows:
            active = w.service == service and operation.startswith(w.operation) and w.start <= t < w.end
            if active and (w.probability >= 1.0 or self._rng.random() < w.probability):
                key = f"{service}:{operation}:{w.code}"
                self.injected[key] = self.injected.get(key, 0) + 1
                return w.code
        return None
