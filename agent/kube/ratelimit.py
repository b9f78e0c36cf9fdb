"""The agent's client-side limit on its Kubernetes request rate: a token bucket (what client-go's
``flowcontrol.NewTokenBucketRateLimiter`` does for every Kubernetes client, ``QPS`` / ``Burst`` in its rest.Config).

What bounds the agent during a wave of Spot warnings is this rate, not a count of drain slots: every warned node is
cordoned at once, and the evictions of all running drains share the same budget, so the apiserver sees at most
``qps`` requests a second on average and ``burst`` at once after a quiet spell.

Urgent requests (the reads and patches that cordon a node, ``KubeAdapter.get_node`` / ``patch_node``) are served
before normal ones that are waiting: a cordon must never queue behind the evictions of earlier drains, or pods
evicted there would be scheduled onto the node that is about to be cordoned.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

EPSILON = 1e-9  # refills are sums of float products: a token due now may be short by rounding


class TokenBucket:
    """``qps`` tokens a second, at most ``burst`` saved; one request takes one token. Thread-safe.

    Args:
        qps: tokens added per second (> 0).
        burst: the bucket's size (>= 1); the bucket starts full.
        clock: monotonic seconds (injectable for tests).

    Raises:
        ValueError: ``qps`` <= 0 or ``burst`` < 1.
    """

    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError(f"a token bucket needs qps > 0 and burst >= 1, got qps={qps} burst={burst}")
        self.qps = float(qps)
        self.burst = int(burst)
        self._clock = clock
        self._tokens = float(burst)
        self._at = clock()
        self._urgent_waiting = 0
        self._cond = threading.Condition()
        self.waited_seconds = 0.0  # total time requests spent waiting here (observability)

    def try_take(self, urgent: bool = False) -> float:
        """Take a token if one is there (and, for a normal request, no urgent one is waiting).

        Returns:
            0.0 when a token was taken, else the seconds until the next token is due (> 0).
        """
        with self._cond:
            return self._try_take(urgent)

    def acquire(self, urgent: bool = False) -> float:
        """Block until a token is taken; urgent callers go before normal ones. Returns the seconds waited."""
        started = self._clock()
        with self._cond:
            if urgent:
                self._urgent_waiting += 1
            try:
                while (wait := self._try_take(urgent, waiting=urgent)) > 0:
                    self._cond.wait(wait)
            finally:
                if urgent:
                    self._urgent_waiting -= 1
                    self._cond.notify_all()
            waited = self._clock() - started
            self.waited_seconds += waited
            return waited

    def _try_take(self, urgent: bool, waiting: bool = False) -> float:
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.qps)
        self._at = now
        others_urgent = self._urgent_waiting - (1 if waiting else 0)
        if not urgent and others_urgent > 0:
            return max(1.0 / self.qps, 0.001)  # let the urgent ones go first; look again after one token's time
        if self._tokens >= 1.0 - EPSILON:
            self._tokens = max(0.0, self._tokens - 1.0)
            return 0.0
        return (1.0 - self._tokens) / self.qps
