"""Instance id -> Auto Scaling group name for the membership reporter, from DescribeAutoScalingInstances, cached.

An instance never moves to another group; it can only leave one (DetachInstances). So a group, once known, is only
asked again when its answer comes due, never later than ``recheck_seconds`` after it: no older answer is used. Each
instance keeps a phase: its first answer (it was not cached: a new node, or every node at the first list of a new
lookup, an agent's start or a new leader's) comes due at its ``spread`` of the period (between half and all of it,
fixed per instance), so the instances of a cluster listed at once are asked again over several resyncs, not in one
burst of calls; every later answer comes due at the first instant of that phase after it (``next_due``: the due
instant of the answer before plus whole periods). A steady cluster is so asked once per instance per period (1,000
instances and a period of 10 resyncs: 100 a resync), and instances asked late together (after calls that failed for
a while) go back to their own phases instead of staying together. An instance asked early (``refresh``) keeps its
due instant. A new period (the first call that rechecks, or another ``recheck_seconds``) spreads every answer again
from its instant.

The answers come due in cohorts: the instances asked by one call (one ``resolve``) share the instant of their answer,
and a cohort keeps their due instants sorted (``_Cohort``), so the answers due at any later instant are a prefix,
found by one bisection. A resolve or a confirmation of a steady cluster costs a bisection per cohort (about one per
resync of the recheck period) plus a few steps per instance due, not a step per cached instance or a heap operation
per answer. An instance forgotten (``retain``), or asked again before its answer came due (``refresh``), has its entry
taken out of its cohort then (a look at the entries still to come due, in C, when a node is gone), so an entry found
due is its instance's latest answer without a look at each, and no map from instance to cohort is kept. A
confirmation's instances found due go from their cohorts' runs to the call and to a new cohort without a map entry
each (``_ripe`` keeps only the due instances a resync's page did not ask, or those of a call that failed); that new
cohort is the runs end to end when they do not overlap (as a steady cluster's do), merged only when they do.
"""

from __future__ import annotations

import threading
import time
import zlib
from bisect import bisect_right
from collections.abc import Callable, Iterable
from itertools import chain, filterfalse, islice, repeat
from operator import add, itemgetter, le

from adapters.aws.ports import GroupReader

DESCRIBE_ASG_INSTANCES_MAX_IDS = 50  # DescribeAutoScalingInstances: "You can specify up to 50 instances"
_DUES, _IDS = itemgetter(0), itemgetter(1)  # of a run (``Run``)
_DUE = itemgetter(1)  # of a ``_ripe`` value

# the instances one look of ``AsgLookup._due`` found due in one cohort: their due instants (ascending), ids, the
# cohort's ``at``
Run = tuple[list[float], list[str], float]


def spread(instance_id: str, span: float) -> float:
    """A fixed point of ``[span / 2, span)`` for ``instance_id`` (CRC-32 of its id). Pure."""
    return span * spread_fraction(instance_id)


def spread_fraction(instance_id: str) -> float:
    """``spread(instance_id, 1.0)``: the instance's fixed fraction of ``[0.5, 1)`` (CRC-32 of its id). Pure."""
    return 0.5 + 0.5 * zlib.crc32(instance_id.encode()) / 2**32


def next_due(due: float, at: float, span: float) -> float:
    """When an answer asked at ``at`` comes due, for an instance whose last one came (or comes) due at ``due``: the
    first of ``due``, ``due + span``, ``due + span + span``, ... after ``at`` (``at`` itself for a ``span`` of 0 or
    less: due at once). At most ``span`` after ``at`` when ``due`` is (as every due instant the lookup keeps is, after
    its answer). Pure."""
    if span <= 0.0:
        return at
    while due <= at:
        due += span
    return due


class _Cohort:
    """The instances one call asked, answered at ``at`` (``AsgLookup.clock`` seconds): ``dues[k]`` is the instant
    ``ids[k]``'s answer comes due, ascending; ``ids[:taken]`` were found due already. An entry not found due yet is
    its instance's latest answer: it is dropped when its instance is forgotten or asked again before it came due
    (``_drop``)."""

    __slots__ = ("at", "dues", "ids", "taken")

    def __init__(self, at: float, dues: list[float], ids: list[str]) -> None:
        self.at, self.dues, self.ids, self.taken = at, dues, ids, 0

    def _drop(self, gone: set[str] | frozenset[str], dropped: dict[str, float]) -> None:
        """The entries of the instances in ``gone`` not found due yet dropped (each one's due instant put in
        ``dropped``), with those found due (never read again): the cohort keeps the entries still to come due,
        ``taken`` 0."""
        ids, dues = self.ids, self.dues
        kept = []
        for k in range(self.taken, len(ids)):
            if ids[k] in gone:
                dropped[ids[k]] = dues[k]
            else:
                kept.append(k)
        self.ids, self.dues, self.taken = list(map(ids.__getitem__, kept)), list(map(dues.__getitem__, kept)), 0


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
        # for the recheck period ``_span`` (set by the first call that rechecks): the cohorts of answers not all due
        # yet, and the instances found due and not asked since with their answer's instant and due instant
        # (``_ripe``, until asked again or forgotten): each cached instance is in one of the two, an entry of a
        # cohort not found due yet or ``_ripe``
        self._span: float | None = None
        self._cohorts: list[_Cohort] = []
        self._ripe: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def resolve(
        self, instance_ids: Iterable[str], refresh: bool = False, recheck_seconds: float | None = None
    ) -> dict[str, str | None]:
        """ASG names of ``instance_ids`` (None for an instance in no group).

        Asks DescribeAutoScalingInstances (in batches of 50) for the instances not cached, for all with
        ``refresh``, and with ``recheck_seconds`` also for those whose answer came due (see the module docstring).

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
            known = list(filter(cache.__contains__, missing))  # asked again: at their phase
            first = [] if len(known) == len(missing) else list(filterfalse(cache.__contains__, missing))
            cache.update(found)
            if self._span is None:
                self._asked.update(dict.fromkeys(missing, now))
            else:
                if first:
                    self._enroll(first, now)
                if known:
                    self._enroll_again(known, now)
            try:
                # all cached now (``retain`` from another thread aside)
                return dict(zip(wanted, map(cache.__getitem__, wanted), strict=True))
            except KeyError:
                return {i: cache.get(i) for i in wanted}

    def due(self, recheck_seconds: float) -> list[str]:
        """The cached instances whose answer came due (see the module docstring) with a period of
        ``recheck_seconds``: what a resolve of all of them with that recheck would ask (the membership's
        confirmation, which lists no node). Sorted."""
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
                self._enroll_again(missing, now)  # the period is set: ``_due`` found them
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

    def _forget_entries(self, instance_ids: Iterable[str]) -> dict[str, float]:
        """The instances' cohort entries dropped (``_Cohort._drop``; forgotten, or asked before they came due): a
        look at each entry not found due yet, in C but for the cohorts that hold one of them (a node gone: a few a
        list). Returns each dropped entry's due instant."""
        gone = instance_ids if isinstance(instance_ids, (set, frozenset)) else set(instance_ids)
        dropped: dict[str, float] = {}
        if not gone:
            return dropped
        spent = False
        for cohort in self._cohorts:
            if not gone.isdisjoint(islice(cohort.ids, cohort.taken, None)):
                cohort._drop(gone, dropped)
                spent |= not cohort.ids
        if spent:
            self._cohorts = [cohort for cohort in self._cohorts if cohort.taken < len(cohort.ids)]
        return dropped

    def _ripe_runs(self, runs: list[Run]) -> None:
        """The instances of ``runs`` (found due by ``_due``, not asked) put in ``_ripe`` as ``_due`` puts them, but
        those ``retain`` forgot meanwhile."""
        cache, ripe = self._cache, self._ripe
        for dues, ids, at in runs:
            ripe.update((i, (at, due)) for i, due in zip(ids, dues, strict=True) if i in cache)

    def _due(
        self,
        wanted: Iterable[str],
        now: float,
        recheck_seconds: float,
        runs: list[Run] | None = None,
    ) -> list[str]:
        """The instances of ``wanted`` whose cached answer came due: ``now >= due``, judged per cohort (all asked at
        one instant) by a bisection of its sorted due instants, each answer once (then kept in ``_ripe``: on a
        monotonic ``clock`` an answer due stays due until asked again). The same instances, float for float, as
        judging every cached instance. ``runs`` (if given) gets the instances found due by this call instead of
        ``_ripe``, a cohort's at a time, with their due instants: each run ascending."""
        if self._span != recheck_seconds:  # another period (the first call): every answer spread again from its instant
            if self._span is None:
                asked = self._asked
            else:  # each cached instance's latest answer: an entry not found due yet, or found due (``_ripe``)
                asked = {instance_id: at for instance_id, (at, _) in self._ripe.items()}
                for cohort in self._cohorts:
                    asked.update(zip(islice(cohort.ids, cohort.taken, None), repeat(cohort.at)))
            self._span, self._asked = recheck_seconds, {}
            self._cohorts, self._ripe = [], {}
            by_time: dict[float, list[str]] = {}
            for instance_id, at in asked.items():
                by_time.setdefault(at, []).append(instance_id)
            for at, ids in by_time.items():
                self._enroll(ids, at)
        ripe = self._ripe
        spent = False
        for cohort in self._cohorts:
            dues, taken = cohort.dues, cohort.taken
            end = bisect_right(dues, now, taken)  # the same float test as ``now >= due``
            if end == taken:
                continue
            came = cohort.ids[taken:end]  # each one's latest answer is this cohort's (``_drop``)
            if runs is None:
                ripe.update(zip(came, zip(repeat(cohort.at), dues[taken:end]), strict=True))
            else:
                runs.append((dues[taken:end], came, cohort.at))
            cohort.taken = end
            spent |= end == len(dues)
        if spent:
            self._cohorts = [cohort for cohort in self._cohorts if cohort.taken < len(cohort.dues)]
        if not ripe:
            return []
        return list(ripe.keys() & wanted)

    def _enroll_runs(self, runs: list[Run], asked_at: float) -> None:
        """``_enroll_again`` of the instances ``runs`` holds (each run: due instants ascending, all of them at or
        before ``asked_at``, ids, its cohort's instant; none in ``_ripe``, every one cached): each due a period later
        (unless that too is past: ``next_due``), their order kept, not looked up and sorted again. Runs that do not
        overlap (those of confirmations a resync apart) are put end to end, not merged."""
        span = self._span or 0.0  # set: ``_due`` found them
        if len(runs) == 1:
            dues, ids, _ = runs[0]
        else:
            runs = sorted(runs, key=lambda run: run[0][0])
            dues = list(chain.from_iterable(map(_DUES, runs)))
            ids = list(chain.from_iterable(map(_IDS, runs)))
            if not all(map(le, dues, islice(dues, 1, None))):  # overlapping runs: merged (timsort)
                order = sorted(range(len(ids)), key=dues.__getitem__)
                dues, ids = list(map(dues.__getitem__, order)), list(map(ids.__getitem__, order))
        later = list(map(add, dues, repeat(span)))  # ``next_due`` of each, in order, when the least is after the answer
        if not later or later[0] <= asked_at:  # asked a period or more late (or no period): each its own
            self._enroll_dues(
                dict(zip(ids, map(next_due, dues, repeat(asked_at), repeat(span)), strict=True)), asked_at
            )
            return
        self._cohorts.append(_Cohort(asked_at, later, ids))

    def _enroll(self, instance_ids: list[str], asked_at: float) -> None:
        """A cohort of the cached ``instance_ids`` answered at ``asked_at``, their answers first ones: each due at
        its ``spread`` of the period after it (none of them in ``_ripe``)."""
        cache, span = self._cache, self._span or 0.0  # set before any cohort
        ids = instance_ids if all(map(cache.__contains__, instance_ids)) else [i for i in instance_ids if i in cache]
        self._enroll_dues({i: asked_at + span * spread_fraction(i) for i in ids}, asked_at)

    def _enroll_again(self, instance_ids: list[str], asked_at: float) -> None:
        """A cohort of the cached ``instance_ids`` asked again at ``asked_at``: each due at the first instant of its
        phase after it (``next_due`` of its last due instant: from ``_ripe``, or from its cohort entry, dropped)."""
        ripe, span = self._ripe, self._span or 0.0
        came = instance_ids if all(map(ripe.__contains__, instance_ids)) else [i for i in instance_ids if i in ripe]
        dues: dict[str, float] = {}
        if came:  # found due: a period on each, in C, unless one was asked a period or more late
            last = list(map(_DUE, map(ripe.pop, came)))
            later = list(map(add, last, repeat(span)))
            if min(later) <= asked_at:
                later = list(map(next_due, last, repeat(asked_at), repeat(span)))
            dues = dict(zip(came, later, strict=True))
        if len(came) < len(instance_ids):  # asked before they came due (``refresh``): their entries' due instants
            pending = [i for i in instance_ids if i not in dues]
            last_of = self._forget_entries(pending)
            dues.update(zip(last_of, map(next_due, last_of.values(), repeat(asked_at), repeat(span)), strict=True))
            # no due instant found (another thread's call between): spread anew
            dues.update({i: asked_at + span * spread_fraction(i) for i in pending if i not in last_of})
        self._enroll_dues(dues, asked_at)

    def _enroll_dues(self, dues: dict[str, float], asked_at: float) -> None:
        """A cohort answered at ``asked_at`` of the instances ``dues`` holds, each due at its instant."""
        ids = sorted(dues, key=dues.__getitem__)  # float keys: compared in C without tuples
        self._cohorts.append(_Cohort(asked_at, list(map(dues.__getitem__, ids)), ids))
