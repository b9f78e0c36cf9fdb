"""The instance -> ASG lookup on moto's Auto Scaling: its batches of DescribeAutoScalingInstances and its cache; its
re-asking: a known group is asked again once per recheck period at a phase of its own, its first answer's spread of
the period, so a cluster listed at once is not re-asked in one burst, nor are instances asked late together; and the
cohorts that find the answers due ask exactly what judging every instance at every resolve asked, and ``due`` names
exactly the instances that judging every cached one names."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterable, Iterator
from itertools import pairwise
from typing import Any

import pytest

from adapters.aws.autoscaling import AutoScaling
from agent.asglookup import AsgLookup, spread, spread_fraction
from core.exceptions import AwsUnavailableError
from tests.unit.agent.membership_world import Aws, CountingAutoscaling


@pytest.fixture
def clock() -> Iterator[list[float]]:
    yield [1000.0]


def test_asg_lookup_batches_caches_and_refreshes(aws: Aws) -> None:
    lookup = AsgLookup(AutoScaling(aws.autoscaling))
    strangers = [f"i-0{n:016x}" for n in range(60)]  # not in any group
    ids = [*aws.instances, *strangers]
    found = lookup.resolve(ids)
    assert {i: found[i] for i in aws.instances} == {i: asg for i, (_, asg) in aws.instances.items()}
    assert all(found[i] is None for i in strangers)
    assert sorted(aws.autoscaling.calls) == [16, 50]

    lookup.resolve(ids[:10])
    assert len(aws.autoscaling.calls) == 2  # cached
    lookup.resolve(list(aws.instances), refresh=True)
    assert aws.autoscaling.calls[2:] == [len(aws.instances)]


def test_known_groups_are_asked_again_spread_over_the_recheck_period(aws: Aws, clock: list[float]) -> None:
    assert isinstance(aws.autoscaling, CountingAutoscaling)
    lookup = AsgLookup(AutoScaling(aws.autoscaling), clock=lambda: clock[0])
    ids = sorted(aws.instances)
    lookup.resolve(ids, recheck_seconds=600)
    assert aws.autoscaling.calls == [len(ids)]

    clock[0] += 60
    lookup.resolve(ids, recheck_seconds=600)
    assert aws.autoscaling.calls == [len(ids)]  # nothing is due one resync later

    due_at = {i: spread(i, 600) for i in ids}
    clock[0] += 240  # 300 s after the first answers: only the instances whose spread is under 300 s
    lookup.resolve(ids, recheck_seconds=600)
    asked = sum(1 for age in due_at.values() if age <= 300)
    assert aws.autoscaling.calls[1:] == ([asked] if asked else [])

    clock[0] += 600  # every answer is older than its spread now
    found = lookup.resolve(ids, recheck_seconds=600)
    assert found == {i: asg for i, (_, asg) in aws.instances.items()}
    assert sum(aws.autoscaling.calls[1:]) >= len(ids) - asked


def test_spread_stays_in_the_second_half_of_the_span() -> None:
    points = [spread(f"i-0{n:016x}", 600) for n in range(500)]
    assert all(300 <= p < 600 for p in points)
    assert max(points) - min(points) > 250  # spread, not bunched


class Groups:
    """An in-memory ``GroupReader``: records each call's ids, answers from ``groups``, fails when told. As the real
    adapter (``adapters.aws.autoscaling.AutoScaling.group_names``: one DescribeAutoScalingInstances call per 50 ids,
    none for no id), an empty call makes no call: answered with nothing, never failing, not recorded."""

    def __init__(self, groups: dict[str, str]) -> None:
        self.groups = groups
        self.calls: list[list[str]] = []
        self.fail = False

    def group_names(self, instance_ids: Iterable[str]) -> dict[str, str]:
        ids = list(instance_ids)
        if not ids:
            return {}
        self.calls.append(ids)
        if self.fail:
            raise AwsUnavailableError("DescribeAutoScalingInstances", "Throttling")
        return {i: self.groups[i] for i in ids if i in self.groups}


def test_an_empty_call_makes_no_call_in_the_adapter_and_in_the_double(aws: Aws) -> None:
    """The double answers an empty call as the real adapter does: nothing, no DescribeAutoScalingInstances call,
    so no failure either (a lookup with nothing to ask may call it, or not, with the same outcome)."""
    assert AutoScaling(aws.autoscaling).group_names([]) == {}
    assert aws.autoscaling.calls == []
    double = Groups({"i-0a": "nodes"})
    double.fail = True
    assert double.group_names([]) == {}
    assert double.calls == []
    with pytest.raises(AwsUnavailableError):
        double.group_names(["i-0a"])
    assert double.calls == [["i-0a"]]


def test_forgotten_instances_leave_no_cohort_behind(clock: list[float]) -> None:
    """An instance forgotten before its answer came due takes its cohort entry with it: once every instance is
    forgotten no cohort is kept, and one listed again is asked as a stranger and comes due as the others do."""
    ids = [f"i-0{n:016x}" for n in range(120)]
    groups = Groups(dict.fromkeys(ids, "nodes"))
    lookup = AsgLookup(groups, clock=lambda: clock[0])
    for start in range(0, 120, 40):  # three cohorts, a resync apart
        lookup.resolve(ids[start : start + 40], recheck_seconds=600)
        clock[0] += 60
    lookup.retain(ids[40:])
    assert lookup.due(600) == []
    lookup.retain([])
    assert lookup._cohorts == [] and lookup._ripe == {}
    lookup.resolve(ids[:1], recheck_seconds=600)
    assert groups.calls[-1] == ids[:1]
    clock[0] += 600
    assert lookup.recheck(600) == {ids[0]: "nodes"}


class EveryInstance:
    """The lookup as it judges every wanted instance at every resolve (before the heap, then the cohorts): the
    reference. An answer to an instance not cached comes due at its spread of the period after it; an answer to a
    cached one at the first of its last due instant plus whole periods after it; a new period spreads every answer
    again from its instant."""

    def __init__(self, autoscaling: Groups, clock: Callable[[], float]) -> None:
        self.autoscaling, self.clock = autoscaling, clock
        self.cache: dict[str, str | None] = {}
        self.asked: dict[str, float] = {}
        self.due_at: dict[str, float] = {}  # once a call gave a period
        self.span: float | None = None

    def resolve(
        self, ids: list[str], refresh: bool = False, recheck_seconds: float | None = None
    ) -> dict[str, str | None]:
        now = self.clock()
        if not refresh and recheck_seconds is not None:
            self._period(recheck_seconds)
        missing = sorted({i for i in ids if refresh or self._stale(i, now, recheck_seconds)})
        found: dict[str, str | None] = dict.fromkeys(missing)
        found.update(self.autoscaling.group_names(missing))
        if self.span is not None:
            for i in missing:
                if i in self.cache:
                    due = self.due_at[i]
                    while due <= now:  # its phase: whole periods on
                        due += self.span
                    self.due_at[i] = due
                else:
                    self.due_at[i] = now + self.span * spread_fraction(i)
        self.cache.update(found)
        self.asked.update(dict.fromkeys(missing, now))
        return {i: self.cache.get(i) for i in ids}

    def due(self, recheck_seconds: float) -> list[str]:
        self._period(recheck_seconds)
        now = self.clock()
        return sorted(i for i in self.cache if self._stale(i, now, recheck_seconds))

    def retain(self, ids: Iterable[str]) -> None:
        for gone in set(self.cache) - set(ids):
            del self.cache[gone]
            self.asked.pop(gone, None)
            self.due_at.pop(gone, None)

    def _period(self, recheck_seconds: float) -> None:
        if recheck_seconds != self.span:
            self.span = recheck_seconds
            self.due_at = {i: self.asked[i] + recheck_seconds * spread_fraction(i) for i in self.cache}

    def _stale(self, instance_id: str, now: float, recheck_seconds: float | None) -> bool:
        if instance_id not in self.cache:
            return True
        if recheck_seconds is None:
            return False
        return now >= self.due_at[instance_id]


@pytest.mark.parametrize("seed", range(6))
def test_the_cohorts_ask_exactly_what_judging_every_instance_asks(seed: int) -> None:
    """Random resyncs (pages, watch look-ups, refreshes, failed calls, nodes gone and back, clock steps (one past two
    periods at once), some landing exactly on an answer's due instant or a quarter second before it, a few under
    another recheck period) and confirmations (``due``, then a refresh of what it names; or ``recheck``, both at
    once): the lookup makes the same calls and gives the same answers as the reference, whose answers come due at
    each instance's phase."""
    rng = random.Random(seed)
    ids = [f"i-0{n:016x}" for n in range(120)]
    groups = {i: f"nodes-{n % 3}" for n, i in enumerate(ids) if n % 7}  # some in no group
    clock = [1000.0]
    ours, theirs = Groups(groups), Groups(groups)
    lookup, reference = AsgLookup(ours, clock=lambda: clock[0]), EveryInstance(theirs, lambda: clock[0])
    listed = ids[:80]
    for _ in range(400):
        roll = rng.random()
        if roll < 0.3:
            clock[0] += rng.choice([1.0, 30.0, 60.0, 60.0, 61.5, 250.0, 1300.0])
        elif roll < 0.4 and reference.asked:  # exactly at some answer's recheck, or just before it
            some = rng.choice(sorted(reference.asked))
            early = rng.choice([0.0, 0.0, 0.25])
            clock[0] = max(clock[0], reference.due_at.get(some, clock[0]) - early)
        elif roll < 0.45:
            listed = sorted(rng.sample(ids, rng.randint(40, 110)))
            lookup.retain(set(listed))
            reference.retain(listed)
            assert lookup.cached() == len(reference.cache)
            continue
        fail = rng.random() < 0.05
        ours.fail = theirs.fail = fail
        kind = rng.random()
        recheck = 600.0 if rng.random() < 0.95 else 300.0  # another period: every answer's cohort anew
        if kind >= 0.93:  # a confirmation in one call (``recheck``): what is due, asked again
            wanted = reference.due(recheck)
            try:
                expected = reference.resolve(wanted, refresh=True) if wanted else {}
            except AwsUnavailableError:
                expected = None
            try:
                got = lookup.recheck(recheck)
            except AwsUnavailableError:
                got = None
            assert got == expected and (got is None or list(got) == wanted)  # in due's order
            assert ours.calls == theirs.calls
            assert lookup.due(600.0) == reference.due(600.0)
            continue
        if kind >= 0.9:  # a confirmation: what is due, then asked again
            due = lookup.due(recheck)
            assert due == reference.due(recheck)
            kind, pages = 0.82, [due] if due else []
        else:
            pages = [listed[i : i + 25] for i in range(0, len(listed), 25)] if kind < 0.8 else [[rng.choice(ids)]]
        args: dict[str, Any] = {"recheck_seconds": recheck} if kind < 0.8 else {"refresh": True} if kind < 0.85 else {}
        for page in pages:
            try:
                expected: dict[str, str | None] | None = reference.resolve(page, **args)
            except AwsUnavailableError:
                expected = None
            try:
                got: dict[str, str | None] | None = lookup.resolve(page, **args)
            except AwsUnavailableError:
                got = None
            assert got == expected
            assert ours.calls == theirs.calls
        assert lookup.due(600.0) == reference.due(600.0)
    assert len(ours.calls) > 100  # the recheck was exercised, not only the first answers


def test_a_recheck_that_fails_leaves_its_instances_due_and_forgets_no_answer(clock: list[float]) -> None:
    """A confirmation's recheck whose call fails asks the same instances at the next one (found due, kept as
    ``due`` names them, not taken for answered), and the cache keeps their last answers meanwhile."""
    ids = [f"i-0{n:016x}" for n in range(90)]
    groups = Groups(dict.fromkeys(ids, "nodes"))
    lookup = AsgLookup(groups, clock=lambda: clock[0])
    lookup.resolve(ids[:45], recheck_seconds=600)
    clock[0] += 60
    lookup.resolve(ids[45:], recheck_seconds=600)
    clock[0] += 600  # every answer due, from two cohorts
    groups.fail = True
    with pytest.raises(AwsUnavailableError):
        lookup.recheck(600)
    assert groups.calls[-1] == ids  # one call of both cohorts' instances, sorted
    assert lookup.due(600) == ids
    assert lookup.resolve(ids[:3]) == dict.fromkeys(ids[:3], "nodes")  # cached, not asked
    groups.fail = False
    lookup.retain(ids[1:])  # one forgotten meanwhile
    assert lookup.recheck(600) == dict.fromkeys(ids[1:], "nodes")
    assert groups.calls[-1] == ids[1:]
    assert lookup.due(600) == [] and lookup.recheck(600) == {}


def test_a_burst_is_spread_once_then_each_instance_is_asked_once_a_period(clock: list[float]) -> None:
    """Instances first asked at once (an agent's first list) are asked again at their spread of the period, over the
    confirmations of its second half, not in one; from then on each is asked exactly a period after its last answer:
    once per instance per period, at the phase its first recheck gave it."""
    ids = [f"i-0{n:016x}" for n in range(500)]
    groups = Groups(dict.fromkeys(ids, "nodes"))
    lookup = AsgLookup(groups, clock=lambda: clock[0])
    start = clock[0]
    lookup.resolve(ids, recheck_seconds=600)
    asked: dict[str, list[float]] = {i: [start] for i in ids}
    per_confirmation = []
    for _ in range(60):  # an hour of confirmations a minute apart (whole seconds: exact float sums)
        clock[0] += 60
        found = lookup.recheck(600)
        per_confirmation.append(len(found))
        for instance_id in found:
            asked[instance_id].append(clock[0])
    for instance_id, times in asked.items():
        first_due = start + spread(instance_id, 600)
        assert times[1] - 60 < first_due <= times[1]  # the first confirmation at its spread
        assert [b - a for a, b in pairwise(times[1:])] == [600.0] * (len(times) - 2)
        assert clock[0] - times[-1] < 600  # never an answer older than the period
    assert per_confirmation[:4] == [0, 0, 0, 0] and max(per_confirmation) < len(ids) / 3  # the burst spread
    assert sum(per_confirmation[-10:]) == len(ids)  # a period of a steady cluster: each instance once


def test_instances_asked_late_together_go_back_to_their_own_phases(clock: list[float]) -> None:
    """Confirmations that fail for longer than the period leave every answer due; the first that succeeds asks them
    all at once, and from then on each instance is asked at its own phase again (the minute of the period it was
    asked at before the failures), not all together every period."""
    ids = [f"i-0{n:016x}" for n in range(500)]
    groups = Groups(dict.fromkeys(ids, "nodes"))
    lookup = AsgLookup(groups, clock=lambda: clock[0])
    lookup.resolve(ids, recheck_seconds=600)
    minute: dict[str, int] = {}  # instance -> the minute of the period it was last asked at, before the failures
    for n in range(1, 31):  # half an hour: past the first rechecks, into the steady phases
        clock[0] += 60
        minute.update(dict.fromkeys(lookup.recheck(600), n % 10))
    groups.fail, calls = True, len(groups.calls)
    for _ in range(13):  # 13 minutes of failed confirmations (but those with none due): every answer due
        clock[0] += 60
        with contextlib.suppress(AwsUnavailableError):
            assert lookup.recheck(600) == {}  # none due: no call
    assert len(groups.calls) - calls >= 5  # those with some due: their phases, 5 minutes of 10
    groups.fail = False
    clock[0] += 60
    assert len(lookup.recheck(600)) == len(ids)  # all at once: each was due
    sizes = []
    for n in range(45, 65):
        clock[0] += 60
        found = lookup.recheck(600)
        sizes.append(len(found))
        assert {minute[i] for i in found} <= {n % 10}  # each at its own phase
    assert max(sizes) < len(ids) / 3  # still spread
    assert sum(sizes[:10]) == sum(sizes[10:]) == len(ids)  # once per instance per period
