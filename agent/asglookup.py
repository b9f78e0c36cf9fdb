"""Instance id -> Auto Scaling group name for the membership reporter, from DescribeAutoScalingInstances, cached.

An instance never moves to another group; it can only leave one (DetachInstances). So a group, once known, is only
asked again after ``recheck_seconds``, at an age spread per instance (``spread``) between half and all of it, so
the instances of a cluster listed at once are asked again over several resyncs, not in one burst of calls.
"""

from __future__ import annotations

import threading
import time
import zlib
from collections.abc import Callable, Iterable

from adapters.aws.ports import GroupReader

DESCRIBE_ASG_INSTANCES_MAX_IDS = 50  # DescribeAutoScalingInstances: "You can specify up to 50 instances"


def spread(instance_id: str, span: float) -> float:
    """A fixed point of ``[span / 2, span)`` for ``instance_id`` (CRC-32 of its id). Pure."""
    return span * spread_fraction(instance_id)


def spread_fraction(instance_id: str) -> float:
    """``spread(instance_id, 1.0)``: the instance's fixed fraction of ``[0.5, 1)`` (CRC-32 of its id). Pure."""
    return 0.5 + 0.5 * zlib.crc32(instance_id.encode()) / 2**32


class AsgLookup:
    """Instance id → Auto Scaling group name (None: in no group, also cached).

    Args:
        autoscaling: the Auto Scaling adapter (``adapters.aws.autoscaling.AutoScaling``).
        clock: monotonic seconds; injectable for tests.
    """

    def __init__(self, autoscaling: GroupReader, clock: Callable[[], float] = time.monotonic) -> None:
        self.autoscaling = autoscaling
        self.clock = clock
        self._cache: dict[str, str | None] = {}
        self._asked: dict[str, float] = {}  # instance id -> clock() of the answer cached
        self._fraction: dict[str, float] = {}  # instance id -> spread_fraction (a CRC-32 once per instance)
        self._lock = threading.Lock()

    def resolve(
        self, instance_ids: Iterable[str], refresh: bool = False, recheck_seconds: float | None = None
    ) -> dict[str, str | None]:
        """ASG names of ``instance_ids`` (None for an instance in no group).

        Asks DescribeAutoScalingInstances (in batches of 50) for the instances not cached, for all with
        ``refresh``, and with ``recheck_seconds`` also for those whose answer is older than their ``spread`` of it.

        Raises:
            AwsUnavailableError, AwsRequestError: the API failed (the caller retries on its next pass).
        """
        wanted = instance_ids if isinstance(instance_ids, (list, tuple)) else list(instance_ids)
        now = self.clock()
        with self._lock:
            # only the few due are sorted (the calls' order); a steady cluster's resync asks none
            missing = sorted({i for i in wanted if refresh or self._stale(i, now, recheck_seconds)})
        found: dict[str, str | None] = dict.fromkeys(missing)
        found.update(self.autoscaling.group_names(missing))
        with self._lock:
            self._cache.update(found)
            self._asked.update(dict.fromkeys(missing, now))
            cache = self._cache
            return {i: cache.get(i) for i in wanted}

    def retain(self, instance_ids: Iterable[str]) -> None:
        """Forget every cached instance not in ``instance_ids`` (after a full list: those have no node)."""
        keep = set(instance_ids)
        with self._lock:
            for gone in set(self._cache) - keep:
                del self._cache[gone]
                self._asked.pop(gone, None)
                self._fraction.pop(gone, None)

    def _stale(self, instance_id: str, now: float, recheck_seconds: float | None) -> bool:
        if instance_id not in self._cache:
            return True
        if recheck_seconds is None:
            return False
        fraction = self._fraction.get(instance_id)
        if fraction is None:
            fraction = self._fraction[instance_id] = spread_fraction(instance_id)
        return now - self._asked.get(instance_id, now) >= recheck_seconds * fraction
