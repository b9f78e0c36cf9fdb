"""Instance id -> Auto Scaling group name for the membership reporter, from DescribeAutoScalingInstances, cached.

An instance never moves to another group; it can only leave one (DetachInstances). So a group, once known, is only
asked again after ``recheck_seconds``, at an age spread per instance (``spread``) between half and all of it, so
the instances of a cluster listed at once are asked again over several resyncs, not in one burst of calls.

The answers come due in cohorts: the instances asked by one call (one ``resolve``) share the instant of their answer,
so within a cohort kept sorted by each instance's recheck age (``_Cohort``) the answers due at any later instant are a
prefix, found by one bisection. A resolve or a confirmation of a steady cluster costs a bisection per cohort (about
one per resync of the recheck period) plus a few C-level steps per instance due, not a step per cached instance or a
heap operation per answer. An instance forgotten (``retain``), or asked again before its answer came due (``refresh``),
has its entry taken out of its cohort then (a look at the entries still to come due, in C, when a node is gone), so an
entry found due is its instance's latest answer without a look at each, and no map from instance to cohort is kept. A
confirmation's instances found due go from their cohorts' runs to the call and to a new cohort without a map entry each
(``_ripe`` keeps only the due instances a resync's page did not ask, or those of a call that failed); that new cohort
is the runs end to end when they do not overlap (as a steady cluster's do), merged only when they do.
"""

from __future__ import annotations

import threading
import time
import zlib
from bisect import bisect_right
from collections.abc import Callable, Iterable
from itertools import chain, islice, repeat
from operator import itemgetter, lt

from adapters.aws.ports import GroupReader

DESCRIBE_ASG_INSTANCES_MAX_IDS = 50  # DescribeAutoScalingInstances: "You can specify up to 50 instances"
_IDS = itemgetter(1)  # of a run (``Run``)


# the instances one look of ``AsgLookup._due`` found due in one cohort: their ages (ascending), ids, the cohort's ``at``
Run = tuple[list[float], list[str], float]


def _least_age(run: Run) -> float:
    return run[0][0]


def _greatest_age(run: Run) -> float:
    return run[0][-1]


def spread(instance_id: str, span: float) -> float:
    """A fixed point of ``[span / 2, span)`` for ``instance_id`` (CRC-32 of its id). Pure."""
    return span * spread_fraction(instance_id)


def spread_fraction(instance_id: str) -> float:
    """``spread(instance_id, 1.0)``: the instance's fixed fraction of ``[0.5, 1)`` (CRC-32 of its id). Pure."""
    return 0.5 + 0.5 * zlib.crc32(instance_id.encode()) / 2**32


class _Cohort:
    """The instances one call asked, answered at ``at`` (``AsgLookup.clock`` seconds): ``ages[k]`` is ``ids[k]``'s
    recheck age (its ``spread`` of the period, seconds), ascending; ``ids[:taken]`` were found due already. An entry
    not found due yet is its instance's latest answer: it is dropped when its instance is forgotten or asked again
    before it came due (``_drop``)."""

    __slots__ = ("ages", "at", "ids", "taken")

    def __init__(self, at: float, ages: list[float], ids: list[str]) -> None:
        self.at, self.ages, self.ids, self.taken = at, ages, ids, 0

    def _drop(self, gone: set[str] | frozenset[str]) -> None:
        """The entries of the instances in ``gone`` not found due yet dropped, with those found due (never read
        again): the cohort keeps the entries still to come due, ``taken`` 0."""
        ids, ages, taken = self.ids, self.ages, self.taken
        kept = [k for k in range(taken, len(ids)) if ids[k] not in gone]
        self.ids, self.ages, self.taken = list(map(ids.__getitem__, kept)), list(map(ages.__getitem__, kept)), 0


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
        # instance id -> clock() of the answer cached, until a call rechecks: then each answer's cohort's ``at``
        self._asked: dict[str, float] = {}
        self._fraction: dict[str, float] = {}  # instance id -> spread_fraction (a CRC-32 once per instance)
        # for the recheck period ``_span`` (set by the first call that rechecks): each cached instance's recheck age
        # (``_span * fraction``), the cohorts of answers not all due yet, and the instances found due and not asked
        # since with their answer's instant (``_ripe``, until asked again or forgotten): each cached instance is in
        # one of the two, an entry of a cohort not found due yet or ``_ripe``
        self._span: float | None = None
        self._age: dict[str, float] = {}
        self._cohorts: list[_Cohort] = []
        self._ripe: dict[str, float] = {}
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
                # the unknown (a look-up each, in C) and the due (by cohort): a steady cluster's resync asks none
                asked = [] if all(map(cache.__contains__, wanted)) else [i for i in wanted if i not in cache]
                if recheck_seconds is not None:
                    asked = [*asked, *self._due(wanted, now, recheck_seconds)]
            missing = sorted(set(asked))  # the calls' order
        found: dict[str, str | None] = dict.fromkeys(missing)
        found.update(self.autoscaling.group_names(missing))
        with self._lock:
            self._cache.update(found)
            if self._span is None:
                self._asked.update(dict.fromkeys(missing, now))
            elif missing:
                if refresh:  # asked again, due or not: an entry not found due yet no longer their latest answer
                    self._forget_entries(missing)
                self._enroll(missing, now, cached=True)
            cache = self._cache
            try:
                # all cached now (``retain`` from another thread aside)
                return dict(zip(wanted, map(cache.__getitem__, wanted), strict=True))
            except KeyError:
                return {i: cache.get(i) for i in wanted}

    def due(self, recheck_seconds: float) -> list[str]:
        """The cached instances whose answer is due again after ``recheck_seconds`` (at their ``spread`` of it):
        what a resolve of all of them with that recheck would ask (the membership's confirmation, which lists no
        node). Sorted."""
        with self._lock:
            self._due((), self.clock(), recheck_seconds)  # brings the answers due into ``_ripe``
            return sorted(self._ripe)  # all cached: ``retain`` forgets an instance from both

    def recheck(self, recheck_seconds: float) -> dict[str, str | None]:
        """The instances ``due`` names asked again: what ``resolve(due(recheck_seconds), refresh=True)`` answers
        and asks, in one pass (the membership's confirmation): instance id -> its group (None: in no group), in
        ``due``'s order; empty, and no call, when none is due.

        Raises:
            AwsUnavailableError, AwsRequestError: the API failed (the caller retries on its next pass).
        """
        with self._lock:
            # none due before: those found now, by run, kept out of ``_ripe`` unless the call fails
            runs: list[Run] | None = None if self._ripe else []
            self._due((), self.clock(), recheck_seconds, runs)
            # the calls' order (sorted and distinct, as ``resolve`` sorts them)
            missing = sorted(self._ripe) if runs is None else sorted(chain.from_iterable(map(_IDS, runs)))
        if not missing:
            return {}
        now = self.clock()  # the answer's instant, read where ``resolve`` reads it
        found: dict[str, str | None] = dict.fromkeys(missing)
        try:
            found.update(self.autoscaling.group_names(missing))
        except BaseException:
            if runs is not None:  # still due: asked at the next call that rechecks, as ``_ripe``
                with self._lock:
                    self._ripe_runs(runs)
            raise
        with self._lock:
            self._cache.update(found)
            if runs is not None and not self._ripe:  # no other call found some due meanwhile
                self._enroll_runs(runs, now)
            else:
                if runs is not None:
                    self._ripe_runs(runs)  # as ``_due`` puts them
                self._enroll(missing, now, cached=True)  # the period is set: ``_due`` found them
        return found  # what the cache now holds for them

    def cached(self) -> int:
        """How many instances the cache holds (an answer each, a group or None)."""
        return len(self._cache)

    def retain(self, instance_ids: Iterable[str]) -> None:
        """Forget every cached instance not in ``instance_ids`` (after a full list: those have no node)."""
        keep = instance_ids if isinstance(instance_ids, (set, frozenset)) else set(instance_ids)
        with self._lock:
            gone = self._cache.keys() - keep
            for instance_id in gone:
                del self._cache[instance_id]
                self._asked.pop(instance_id, None)
                self._fraction.pop(instance_id, None)
                self._age.pop(instance_id, None)
                self._ripe.pop(instance_id, None)
            self._forget_entries(gone)

    def _forget_entries(self, instance_ids: Iterable[str]) -> None:
        """The instances' cohort entries dropped (``_Cohort._drop``; forgotten, or asked before they came due): a
        look at each entry not found due yet, in C but for the cohorts that hold one of them (a node gone: a few a
        list)."""
        gone = instance_ids if isinstance(instance_ids, (set, frozenset)) else set(instance_ids)
        if not gone:
            return
        spent = False
        for cohort in self._cohorts:
            if not gone.isdisjoint(islice(cohort.ids, cohort.taken, None)):
                cohort._drop(gone)
                spent |= not cohort.ids
        if spent:
            self._cohorts = [cohort for cohort in self._cohorts if cohort.taken < len(cohort.ids)]

    def _ripe_runs(self, runs: list[Run]) -> None:
        """The instances of ``runs`` (found due by ``_due``, not asked) put in ``_ripe`` as ``_due`` puts them, but
        those ``retain`` forgot meanwhile."""
        cache, ripe = self._cache, self._ripe
        for _, ids, at in runs:
            ripe.update((i, at) for i in ids if i in cache)

    def _due(
        self,
        wanted: Iterable[str],
        now: float,
        recheck_seconds: float,
        runs: list[Run] | None = None,
    ) -> list[str]:
        """The instances of ``wanted`` whose cached answer is due again: ``now - asked >= recheck_seconds *
        fraction``, judged per cohort (all asked at one instant) by a bisection of its sorted ages, each answer
        once (then kept in ``_ripe``: on a monotonic ``clock`` an answer due stays due until asked again). The same
        instances, float for float, as judging every cached instance. ``runs`` (if given) gets the instances found
        due by this call instead of ``_ripe``, a cohort's at a time, with their ages: each run in ascending age."""
        if self._span != recheck_seconds:  # another period (the first call): every answer's cohort again
            if self._span is None:
                asked = self._asked
            else:  # each cached instance's latest answer: an entry not found due yet, or found due (``_ripe``)
                asked = dict(self._ripe)
                for cohort in self._cohorts:
                    asked.update(zip(islice(cohort.ids, cohort.taken, None), repeat(cohort.at)))
            self._span, self._asked = recheck_seconds, {}
            self._age, self._cohorts, self._ripe = {}, [], {}
            by_time: dict[float, list[str]] = {}
            for instance_id, at in asked.items():
                by_time.setdefault(at, []).append(instance_id)
            for at, ids in by_time.items():
                self._enroll(ids, at)
        ripe = self._ripe
        spent = False
        for cohort in self._cohorts:
            ages, taken = cohort.ages, cohort.taken
            end = bisect_right(ages, now - cohort.at, taken)  # the same float test as ``now - asked >= age``
            if end == taken:
                continue
            came = cohort.ids[taken:end]  # each one's latest answer is this cohort's (``_drop``)
            if runs is None:
                ripe.update(dict.fromkeys(came, cohort.at))
            else:
                runs.append((ages[taken:end], came, cohort.at))
            cohort.taken = end
            spent |= end == len(ages)
        if spent:
            self._cohorts = [cohort for cohort in self._cohorts if cohort.taken < len(cohort.ages)]
        if not ripe:
            return []
        return list(ripe.keys() & wanted)

    def _enroll_runs(self, runs: list[Run], asked_at: float) -> None:
        """``_enroll`` of the instances ``runs`` holds (each run: ages ascending, ids, its cohort's instant; none in
        ``_ripe``, every one cached), answered at ``asked_at``: their ages merged as their cohorts kept them, not
        looked up and sorted again. Runs that do not overlap (those of confirmations a resync apart: each cohort's
        run is the ages between the last two looks, shifted by its answers' instant) are put end to end by their least
        age, not merged."""
        if len(runs) == 1:
            ages, ids, _ = runs[0]
        elif all(map(lt, map(_greatest_age, ordered := sorted(runs, key=_least_age)), map(_least_age, ordered[1:]))):
            ages = list(chain.from_iterable(map(itemgetter(0), ordered)))  # end to end: each run's ages above the last
            ids = list(chain.from_iterable(map(itemgetter(1), ordered)))
        else:
            every_age = list(chain.from_iterable(run[0] for run in runs))
            every_id = list(chain.from_iterable(run[1] for run in runs))
            order = sorted(range(len(every_id)), key=every_age.__getitem__)  # a merge of the runs (timsort)
            ages, ids = list(map(every_age.__getitem__, order)), list(map(every_id.__getitem__, order))
        self._cohorts.append(_Cohort(asked_at, ages, ids))

    def _enroll(self, instance_ids: list[str], asked_at: float, cached: bool = False) -> None:
        """A cohort of the cached ``instance_ids``, answered at ``asked_at``: their latest answer, not due.
        ``cached``: every one of them is (their answers were just put in the cache, under the same lock)."""
        cache, ages, span = self._cache, self._age, self._span or 0.0  # set before any cohort
        ids = (
            instance_ids
            if cached or all(map(cache.__contains__, instance_ids))
            else [i for i in instance_ids if i in cache]
        )
        if not all(map(ages.__contains__, ids)):
            fractions = self._fraction
            for instance_id in ids:
                if instance_id not in ages:
                    fraction = fractions.get(instance_id)
                    if fraction is None:
                        fraction = fractions[instance_id] = spread_fraction(instance_id)
                    ages[instance_id] = span * fraction  # the very product ``now - asked >= age`` compares to
        ids = sorted(ids, key=ages.__getitem__)  # float keys: compared in C without tuples
        self._cohorts.append(_Cohort(asked_at, list(map(ages.__getitem__, ids)), ids))
        ripe = self._ripe
        if ripe:
            asked = ripe.keys() & ids
            if len(asked) == len(ripe):  # every instance found due asked again (a confirmation's recheck)
                ripe.clear()
            else:
                for instance_id in asked:
                    del ripe[instance_id]
