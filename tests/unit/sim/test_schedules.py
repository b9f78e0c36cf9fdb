"""sim.schedules: one seed gives one schedule; the quiet tail stays quiet; rates follow the profile."""

from __future__ import annotations

import random
from collections import Counter

from sim.schedules import CALM, DAY, KINDS, STORM, Profile, generate


def test_same_seed_same_schedule() -> None:
    assert generate(random.Random(5), 300, 7) == generate(random.Random(5), 300, 7)
    assert generate(random.Random(5), 300, 7) != generate(random.Random(6), 300, 7)


def test_entries_are_sorted_known_and_out_of_the_quiet_tail() -> None:
    profile = Profile()
    schedule = generate(random.Random(1), 300, 7, profile)
    assert list(schedule) == sorted(schedule)
    assert {f.kind for f in schedule} <= set(KINDS)
    assert all(0 <= f.at < 7 * DAY - profile.quiet_tail for f in schedule)
    assert sum(1 for f in schedule if f.kind == "outage") == profile.outages


def test_spot_rate_follows_the_band() -> None:
    # 10 % of 3,000 instances a month: about 70 a week
    schedule = generate(random.Random(2), 3000, 7, Profile(quiet_tail=0))
    spots = sum(1 for f in schedule if f.kind == "spot")
    assert 40 < spots < 100


def test_calm_profile_has_nothing() -> None:
    assert generate(random.Random(3), 300, 7, CALM) == ()


def test_storm_draws_every_kind_of_fault_often() -> None:
    """The storm profile's week holds every kind but the manual ones several times over: more faults at once."""
    storm = generate(random.Random(3), 100, 7, STORM)
    default = generate(random.Random(3), 100, 7, Profile())
    count = Counter(f.kind for f in storm)
    assert count["outage"] == STORM.outages == 2 * Profile().outages
    assert set(KINDS) <= set(count), set(KINDS) - set(count)
    assert len(storm) > 3 * len(default)
