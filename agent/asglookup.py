"""Instance id -> Auto Scaling group name for the membership reporter, from DescribeAutoScalingInstances, cached.

An instance never moves to another group; it can only leave one (DetachInstances). So a group, once known, is only
asked again when its answer is ``recheck_seconds`` old: no older answer is used. An instance's first answer (it was
not cached: a new node, or every node at the first list of a new lookup, an agent's start or a new leader's) comes due
earlier, at its ``spread`` of the period (between half and all of it, fixed per instance), so the instances of a
cluster listed at once are asked again over several resyncs, not in one burst of calls; every later answer (the
instance was cached: asked because it came due, asked again early by ``refresh``, or asked again after a call that
failed) comes due a full period after it. A burst is spread once, and then each instance keeps its phase: a steady
cluster is asked once per instance per period (1,000 instances and a period of 10 resyncs: 100 a resync).

The answers come due in cohorts: the instances asked by one call (one ``resolve``) share the instant of their answer,
so within a cohort kept sorted by each instance's recheck age (``_Cohort``: its spread for first answers, the period
for later ones) the answers due at any later instant are a prefix, found by one bisection. A resolve or a confirmation
of a steady cluster costs a bisection per cohort (about one per resync of the recheck period) plus a few C-level steps
per instance due, not a step per cached instance or a heap operation per answer. An instance forgotten (``retain``),
or asked again before its answer came due (``refresh``), has its entry taken out of its cohort then (a look at the
entries still to come due, in C, when a node is gone), so an entry found due is its instance's latest answer without a
look at each, and no map from instance to cohort is kept. A confirmation's instances found due go from their cohorts'
runs to the call and to a new cohort (of later answers: one age, in any order) without a map entry each (``_ripe``
keeps only the due instances a resync's page did not ask, or those of a call that failed).
"""

from __future__ import annotations

import threading
import time
import zlib
from bisect import bisect_right
from collections.abc import Callable, Iterable
from itertools import chain, filterfalse, islice, repeat
from operator import itemgetter

from adapters.aws.ports import GroupReader

DESCRIBE_ASG_INSTANCES_MAX_IDS = 50  # DescribeAutoScalingInstances: "You can specify up to 50 instances"
_IDS = itemgetter(0)  # of a run (``Run``)

# an answer: the instant it was asked at (``AsgLookup.clock`` seconds), and whether it was its instance's first
Answer = tuple[float, bool]
# the instances one look of ``AsgLookup._due`` found due in one cohort: their ids, the cohort's answer
Run = tuple[list[str], Answer]


def spread(instance_id: str, span: float) -> float:
    """A fixed point of ``[span / 2, span)`` for ``instance_id`` (CRC-32 of its id). Pure."""
    return span * spread_fraction(instance_id)


def spread_fraction(instance_id: str) -> float:
    """``spread(instance_id, 1.0)``: the instance's fixed fraction of ``[0.5, 1)`` (CRC-32 of its id). Pure."""
    return 0.5 + 0.5 * zlib.crc32(instance_id.encode()) / 2**32


class _Cohort:
    """The instances one call asked, with one kind of ``answer`` (the instant ``at``, ``AsgLookup.clock`` seconds,
    and whether they are their instances' first answers): ``ages[k]`` is ``ids[k]``'s recheck age (seconds: its
    ``spread`` of the period for a first answer, the period for a later one), ascending; ``ids[:taken]`` were found
    due already. An entry not found due yet is its instance's latest answer: it is dropped when its instance is
    forgotten or asked again before it came due (``_drop``)."""

    __slots__ = ("ages", "answer", "at", "ids", "taken")

    def __init__(self, answer: Answer, ages: list[float], ids: list[str]) -> None:
        self.answer, self.at, self.ages, self.ids, self.taken = answer, answer[0], ages, ids, 0

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
        # instance id -> its cached answer (``Answer``), until a call rechecks: then its cohort's (``_Cohort.answer``)
        self._asked: dict[str, Answer] = {}
        # for the recheck period ``_span`` (set by the first call that rechecks): the cohorts of answers not all due
        # yet, and the instances found due and not asked since with their answer (``_ripe``, until asked again or
        # forgotten): each cached instance is in one of the two, an entry of a cohort not found due yet or ``_ripe``
        self._span: float | None = None
        self._cohorts: list[_Cohort] = []
        self._ripe: dict[str, Answer] = {}
        self._lock = threading.Lock()

    def resolve(
        self, instance_ids: Iterable[str], refresh: bool = False, recheck_seconds: float | None = None
    ) -> dict[str, str | None]:
        """ASG names of ``instance_ids`` (None for an instance in no group).

        Asks DescribeAutoScalingInstances (in batches of 50) for the instances not cached, for all with
        ``refresh``, and with ``recheck_seconds`` also for those whose answer is due again (a first answer at its
        ``spread`` of the period, a later one at all of it).

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
            cache = self._cache
            known = list(filter(cache.__contains__, missing))  # asked again: a later answer each
            first = [] if len(known) == len(missing) else list(filterfalse(cache.__contains__, missing))
            cache.update(found)
            if self._span is None:
                self._asked.update(dict.fromkeys(known, (now, False)))
                self._asked.update(dict.fromkeys(first, (now, True)))
            else:
                if refresh and known:  # asked again, due or not: an entry not found due yet no longer their latest
                    self._forget_entries(known)
                if first:
                    self._enroll(first, (now, True), cached=True)
                if known:
                    self._enroll(known, (now, False), cached=True)
            try:
                # all cached now (``retain`` from another thread aside)
                return dict(zip(wanted, map(cache.__getitem__, wanted), strict=True))
            except KeyError:
                return {i: cache.get(i) for i in wanted}

    def due(self, recheck_seconds: float) -> list[str]:
        """The cached instances whose answer is due again after ``recheck_seconds`` (a first answer at its
        ``spread`` of it, a later one at all of it): what a resolve of all of them with that recheck would ask (the
        membership's confirmation, which lists no node). Sorted."""
        with self._lock:
            self._due((), self.clock(), recheck_seconds)  # brings the answers due into ``_ripe``
            return sorted(self._ripe)  # all cached: ``retain`` forgets an instance from both

    def recheck(self, recheck_seconds: float) -> dict[str, str | None]:
        """The instances ``due`` names asked again: what ``resolve(due(recheck_seconds), refresh=True)`` answers
        and asks, in one pass (the membership's confirmation): instance id -> its group (None: in no group), in
        ``due``'s order; empty, and no call, when none is due. Their answers are later ones: due a period after.

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
                # one cohort of the runs end to end: later answers, all of one age, so in any order
                ids = runs[0][0] if len(runs) == 1 else list(chain.from_iterable(map(_IDS, runs)))
                self._cohorts.append(_Cohort((now, False), [self._span or 0.0] * len(ids), ids))
            else:
                if runs is not None:
                    self._ripe_runs(runs)  # as ``_due`` puts them
                self._enroll(missing, (now, False), cached=True)  # the period is set: ``_due`` found them
        return found  # what the cache now holds for them

    def cached(self) -> int:
        """How many instances the cache holds (an answer each, a group or None)."""
        return len(self._cache)

    def retain(self, instance_ids: Iterable[str]) -> None:
        """Forget every cached instance not in ``instance_ids`` (after a full list: those have no node; one listed
        again is asked as a new one, its answer a first one)."""
        keep = instance_ids if isinstance(instance_ids, (set, frozenset)) else set(instance_ids)
        with self._lock:
            gone = self._cache.keys() - keep
            for instance_id in gone:
                del self._cache[instance_id]
                self._asked.pop(instance_id, None)
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
        for ids, answer in runs:
            ripe.update((i, answer) for i in ids if i in cache)

    def _due(
        self,
        wanted: Iterable[str],
        now: float,
        recheck_seconds: float,
        runs: list[Run] | None = None,
    ) -> list[str]:
        """The instances of ``wanted`` whose cached answer is due again: ``now - asked >= recheck_seconds *
        fraction`` for a first answer, ``>= recheck_seconds`` for a later one, judged per cohort (all asked at one
        instant) by a bisection of its sorted ages, each answer once (then kept in ``_ripe``: on a monotonic
        ``clock`` an answer due stays due until asked again). The same instances, float for float, as judging every
        cached instance. ``runs`` (if given) gets the instances found due by this call instead of ``_ripe``, a
        cohort's at a time."""
        if self._span != recheck_seconds:  # another period (the first call): every answer's cohort again
            if self._span is None:
                latest = self._asked
            else:  # each cached instance's latest answer: an entry not found due yet, or found due (``_ripe``)
                latest = dict(self._ripe)
                for cohort in self._cohorts:
                    latest.update(zip(islice(cohort.ids, cohort.taken, None), repeat(cohort.answer)))
            self._span, self._asked = recheck_seconds, {}
            self._cohorts, self._ripe = [], {}
            by_answer: dict[Answer, list[str]] = {}
            for instance_id, answer in latest.items():
                by_answer.setdefault(answer, []).append(instance_id)
            for answer, ids in by_answer.items():
                self._enroll(ids, answer)
        ripe = self._ripe
        spent = False
        for cohort in self._cohorts:
            ages, taken = cohort.ages, cohort.taken
            end = bisect_right(ages, now - cohort.at, taken)  # the same float test as ``now - asked >= age``
            if end == taken:
                continue
            came = cohort.ids[taken:end]  # each one's latest answer is this cohort's (``_drop``)
            if runs is None:
                ripe.update(dict.fromkeys(came, cohort.answer))
            else:
                runs.append((came, cohort.answer))
            cohort.taken = end
            spent |= end == len(ages)
        if spent:
            self._cohorts = [cohort for cohort in self._cohorts if cohort.taken < len(cohort.ages)]
        if not ripe:
            return []
        return list(ripe.keys() & wanted)

    def _enroll(self, instance_ids: list[str], answer: Answer, cached: bool = False) -> None:
        """A cohort of the cached ``instance_ids``, their ``answer`` (asked at, first): their latest answer, not due.
        ``cached``: every one of them is (their answers were just put in the cache, under the same lock)."""
        cache, span = self._cache, self._span or 0.0  # set before any cohort
        ids = (
            instance_ids
            if cached or all(map(cache.__contains__, instance_ids))
            else [i for i in instance_ids if i in cache]
        )
        if answer[1]:  # first answers: each at its spread, the very product ``now - asked >= age`` compares to
            age = {instance_id: span * spread_fraction(instance_id) for instance_id in ids}
            ids = sorted(age, key=age.__getitem__)  # float keys: compared in C without tuples
            self._cohorts.append(_Cohort(answer, list(map(age.__getitem__, ids)), ids))
        else:  # later answers: all of one age, the period
            self._cohorts.append(_Cohort(answer, [span] * len(ids), ids))
        ripe = self._ripe
        if ripe:
            asked = ripe.keys() & ids
            if len(asked) == len(ripe):  # every instance found due asked again (a confirmation's recheck)
                ripe.clear()
            else:
                for instance_id in asked:
                    del ripe[instance_id]
