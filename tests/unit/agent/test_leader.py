"""Leader election's decisions (pure) and the elector's rounds against an in-memory Lease store that answers like
the apiserver (a replace carrying a stale resourceVersion is refused). The same elector against the real
kube-apiserver, in two processes, is in tests/integration/agent/test_agent_operation.py."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agent.kube.views import LeaseView
from agent.leader import LeaderElector, Move, choose, lease_spec
from core.exceptions import KubernetesApiError

T0 = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)


def lease(holder: str, rv: str = "1", duration: int | None = 10, transitions: int = 0) -> LeaseView:
    return LeaseView(
        namespace="node-manager",
        name="agent",
        resource_version=rv,
        holder=holder,
        duration_seconds=duration,
        acquire_time=T0,
        renew_time=T0,
        transitions=transitions,
    )


@pytest.mark.parametrize(
    "current, unchanged_for, move",
    [
        (None, 0.0, Move.CREATE),
        (lease("me"), 0.0, Move.RENEW),
        (lease("me"), 999.0, Move.RENEW),
        (lease(""), 0.0, Move.ACQUIRE),  # released
        (lease("other"), 9.9, Move.WAIT),
        (lease("other"), 10.1, Move.ACQUIRE),  # silent for a whole lease
        (lease("other", duration=None), 5.1, Move.ACQUIRE),  # no duration on the Lease: ours (5 s here)
    ],
)
def test_choose(current: LeaseView | None, unchanged_for: float, move: Move) -> None:
    assert choose(current, "me", unchanged_for, default_duration_seconds=5) is move


def test_a_renewal_keeps_acquire_time_and_transitions_a_takeover_counts_one() -> None:
    later = T0 + timedelta(seconds=30)
    renewed = lease_spec(Move.RENEW, lease("me", transitions=3), "me", later, 10)
    assert renewed["acquireTime"] == "2024-03-05T10:00:00.000000Z"
    assert renewed["renewTime"] == "2024-03-05T10:00:30.000000Z"
    assert renewed["leaseTransitions"] == 3 and renewed["holderIdentity"] == "me"
    taken = lease_spec(Move.ACQUIRE, lease("other", transitions=3), "me", later, 9.5)
    assert taken["acquireTime"] == taken["renewTime"] and taken["leaseTransitions"] == 4
    assert taken["leaseDurationSeconds"] == 10
    with pytest.raises(ValueError):
        lease_spec(Move.WAIT, lease("other"), "me", later, 10)


class FakeLeases:
    """One Lease with optimistic concurrency on resourceVersion, like the apiserver; ``down`` makes calls fail."""

    def __init__(self) -> None:
        self.lease: LeaseView | None = None
        self.rv = 0
        self.down = False
        self.writes: list[str] = []

    def _check(self) -> None:
        if self.down:
            raise KubernetesApiError("apiserver unreachable")

    def _store(self, spec: Mapping[str, Any]) -> LeaseView:
        self.rv += 1
        self.lease = LeaseView.from_api(
            {
                "metadata": {"namespace": "node-manager", "name": "agent", "resourceVersion": str(self.rv)},
                "spec": dict(spec),
            }
        )
        self.writes.append(spec["holderIdentity"])
        return self.lease

    def get_lease(self, namespace: str, name: str) -> LeaseView | None:
        self._check()
        return self.lease

    def create_lease(self, namespace: str, name: str, spec: Mapping[str, Any]) -> LeaseView | None:
        self._check()
        return None if self.lease is not None else self._store(spec)

    def replace_lease(
        self, namespace: str, name: str, spec: Mapping[str, Any], resource_version: str
    ) -> LeaseView | None:
        self._check()
        if self.lease is None or self.lease.resource_version != resource_version:
            return None
        return self._store(spec)


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def elector(
    leases: FakeLeases, identity: str, clock: Clock, changes: list[tuple[str, bool]] | None = None
) -> LeaderElector:
    log = changes if changes is not None else []
    return LeaderElector(
        leases,
        "node-manager",
        "agent",
        identity,
        lease_seconds=10,
        renew_deadline_seconds=7,
        retry_seconds=2,
        monotonic=clock,
        now=lambda: T0 + timedelta(seconds=clock.t),
        on_change=lambda leading: log.append((identity, leading)),
    )


def test_one_leads_the_other_waits_then_takes_over_when_the_leader_goes_silent() -> None:
    leases, clock, changes = FakeLeases(), Clock(), []
    a, b = elector(leases, "a", clock, changes), elector(leases, "b", clock, changes)
    assert a.step() is True and b.step() is False
    assert a.state_known and b.state_known and changes == [("a", True), ("b", False)]  # first known states
    for _ in range(5):  # a renews every 2 s: b keeps waiting
        clock.t += 2
        assert a.step() is True and b.step() is False
    # a dies (no more rounds); b takes over once the Lease was unchanged for more than the lease duration
    taken_at = None
    for _ in range(10):
        clock.t += 2
        if b.step():
            taken_at = clock.t
            break
    assert taken_at is not None and 10 < taken_at - (100 + 10) <= 12
    assert leases.lease is not None and leases.lease.holder == "b" and leases.lease.transitions == 1
    # a comes back (it was only paused): it sees b's Lease and steps down for good
    assert a.step() is False and a.lost.is_set() and not a.leading.is_set()
    assert changes == [("a", True), ("b", False), ("b", True), ("a", False)]


def test_two_candidates_racing_for_a_free_lease_one_wins() -> None:
    leases, clock = FakeLeases(), Clock()
    a, b = elector(leases, "a", clock), elector(leases, "b", clock)
    first = leases.get_lease("node-manager", "agent")
    assert first is None
    assert a.step() is True
    # b read nothing, then tries to create: the create conflicts, b stays a standby
    assert b.step() is False and leases.lease is not None and leases.lease.holder == "a"


def test_a_leader_that_cannot_renew_keeps_leading_within_the_renew_deadline_then_steps_down() -> None:
    leases, clock = FakeLeases(), Clock()
    a = elector(leases, "a", clock)
    assert a.step() is True
    leases.down = True
    clock.t += 6
    assert a.step() is True and not a.lost.is_set()  # 6 s < renew deadline 7 s
    clock.t += 2
    assert a.step() is False and a.lost.is_set()  # 8 s without a renewal: before anyone may take over (10 s)


def test_an_unreachable_apiserver_leaves_a_new_candidate_in_the_unknown_state() -> None:
    leases, clock = FakeLeases(), Clock()
    leases.down = True
    a = elector(leases, "a", clock)
    assert a.step() is False and not a.state_known and not a.lost.is_set()


def test_release_lets_the_standby_take_over_at_its_next_round() -> None:
    leases, clock = FakeLeases(), Clock()
    a, b = elector(leases, "a", clock), elector(leases, "b", clock)
    assert a.step() and not b.step()
    assert a.release() is True
    assert leases.lease is not None and leases.lease.holder == "" and leases.lease.duration_seconds == 1
    assert not a.leading.is_set() and not a.lost.is_set()
    clock.t += 2
    assert b.step() is True
    assert a.release() is False  # no longer the holder: nothing to release
