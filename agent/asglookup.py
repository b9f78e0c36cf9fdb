"""Instance id -> Auto Scaling group name for the membership reporter, from DescribeAutoScalingInstances, cached.

An instance never moves to another group; it can only leave one (DetachInstances). So a group, once known, is only
asked again after ``recheck_seconds``, at an age spread per instance (``spread``) between half and all of it, so
the instances of a cluster listed at once are asked again over several resyncs, not in one burst of calls.

A resolve of a steady cluster costs a dictionary look-up per instance: the answers come due in time order from a
heap (``_due``), so only the few near their recheck are judged (``_stale``), not every instance at every resolve.
"""

from __future__ import annotations

import heapq
import threading
import time
import zlib
from collections.abc import Callable, Collection, Iterable

from adapters.aws.ports import GroupReader

DESCRIBE_ASG_INSTANCES_MAX_IDS = 50  # DescribeAutoScalingInstances: "You can specify up to 50 instances"
DUE_SLACK_SECONDS = 1.0  # the heap's times are sums of floats: an answer this near its recheck is judged exactly


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
        # (about when the answer is due again, instance id), a heap for the recheck period ``_span``; an entry counts
        # only while it is the instance's latest (``_entry``), older ones are dropped as they come up
        self._heap: list[tuple[float, str]] = []
        self._entry: dict[str, tuple[float, str]] = {}
        self._span: float | None = None
        self._near: dict[str, None] = {}  # instances whose entry came up: judged at each resolve until asked again
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
            cache = self._cache
            asked: Iterable[str] = wanted
            if not refresh:
                # the unknown (a look-up each, in C) and the due (from the heap): a steady cluster's resync asks none
                asked = [] if all(map(cache.__contains__, wanted)) else [i for i in wanted if i not in cache]
                if recheck_seconds is not None:
                    asked = [*asked, *self._due(wanted, now, recheck_seconds)]
            missing = sorted(set(asked))  # the calls' order
        found: dict[str, str | None] = dict.fromkeys(missing)
        found.update(self.autoscaling.group_names(missing))
        with self._lock:
            self._cache.update(found)
            self._asked.update(dict.fromkeys(missing, now))
            if self._span is not None:
                for instance_id in missing:
                    self._push(instance_id, now, self._span)
            cache = self._cache
            try:
                return {i: cache[i] for i in wanted}  # all cached now (``retain`` from another thread aside)
            except KeyError:
                return {i: cache.get(i) for i in wanted}

    def due(self, recheck_seconds: float) -> list[str]:
        """The cached instances whose answer is due again after ``recheck_seconds`` (at their ``spread`` of it),
        from the heap: what a resolve of all of them with that recheck would ask (the membership's confirmation,
        which lists no node). Sorted."""
        with self._lock:
            now = self.clock()
            self._due((), now, recheck_seconds)  # brings the answers near their recheck up (``_near``)
            cache = self._cache
            return sorted(i for i in self._near if i in cache and self._stale(i, now, recheck_seconds))

    def retain(self, instance_ids: Iterable[str]) -> None:
        """Forget every cached instance not in ``instance_ids`` (after a full list: those have no node)."""
        keep = instance_ids if isinstance(instance_ids, (set, frozenset)) else set(instance_ids)
        with self._lock:
            for gone in self._cache.keys() - keep:
                del self._cache[gone]
                self._asked.pop(gone, None)
                self._fraction.pop(gone, None)
                self._entry.pop(gone, None)
                self._near.pop(gone, None)

    def _due(self, wanted: Collection[str], now: float, recheck_seconds: float) -> list[str]:
        """The instances of ``wanted`` whose cached answer is due again (``_stale``), judged only for the answers
        the heap has brought within ``DUE_SLACK_SECONDS`` of their recheck (``_near``, until asked again or
        forgotten); the same as ``_stale`` on every instance."""
        if self._span != recheck_seconds:  # another period (the first call): every answer's time again
            self._span = recheck_seconds
            self._heap, self._entry, self._near = [], {}, {}
            for instance_id, at in self._asked.items():
                self._push(instance_id, at, recheck_seconds)
        heap, latest, near = self._heap, self._entry, self._near
        while heap and heap[0][0] <= now + DUE_SLACK_SECONDS:
            entry = heapq.heappop(heap)
            if latest.get(entry[1]) is entry:  # else asked again since, or forgotten
                near[entry[1]] = None
        if not near:
            return []
        return [i for i in near.keys() & wanted if self._stale(i, now, recheck_seconds)]

    def _push(self, instance_id: str, asked_at: float, span: float) -> None:
        if instance_id not in self._cache:
            return
        fraction = self._fraction.get(instance_id)
        if fraction is None:
            fraction = self._fraction[instance_id] = spread_fraction(instance_id)
        entry = (asked_at + span * fraction, instance_id)
        self._entry[instance_id] = entry
        self._near.pop(instance_id, None)
        heapq.heappush(self._heap, entry)

    def _stale(self, instance_id: str, now: float, recheck_seconds: float | None) -> bool:
        if instance_id not in self._cache:
            return True
        if recheck_seconds is None:
            return False
        fraction = self._fraction.get(instance_id)
        if fraction is None:
            fraction = self._fraction[instance_id] = spread_fraction(instance_id)
        return now - self._asked.get(instance_id, now) >= recheck_seconds * fraction
