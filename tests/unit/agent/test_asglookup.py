"""The instance -> ASG lookup's re-asking: a known group is asked again only after its spread of the recheck
period, so a cluster listed at once is not re-asked in one burst (moto's Auto Scaling behind it)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from adapters.aws.autoscaling import AutoScaling
from agent.asglookup import AsgLookup, spread
from tests.unit.agent.test_membership import Aws, CountingAutoscaling
from tests.unit.agent.test_membership import aws as aws  # the moto cluster fixture, reused


@pytest.fixture
def clock() -> Iterator[list[float]]:
    yield [1000.0]


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
