"""The lease rules of ``core.lock``: who may renew, the next fencing value, a lease long enough for an invocation."""

from core.lock import LEASE_MARGIN_SECONDS, fencing_of, held_seconds, lease_too_short, renewable_by


def test_a_lease_must_outlive_the_function_timeout_by_the_margin() -> None:
    assert lease_too_short(120, 60) is None
    assert lease_too_short(60 + LEASE_MARGIN_SECONDS, 60) is None
    problem = lease_too_short(60 + LEASE_MARGIN_SECONDS - 1, 60)
    assert problem is not None and "function timeout (60 s)" in problem and "89 s" in problem
    assert lease_too_short(10, None) is None  # unknown timeout: nothing to check here


def test_renewal_and_fencing_follow_the_item() -> None:
    item = {"holder": "a", "operation": "refresh", "lease_expires_at": 100.0, "fencing": 4}
    lease = renewable_by(item, "a", 99.0)
    assert lease is not None and lease.fencing == 4
    assert renewable_by(item, "a", 100.0) is None and renewable_by(item, "b", 99.0) is None
    assert fencing_of(item) == 4 and fencing_of(None) == 0


def test_lock_age_is_zero_when_free_and_counts_from_the_acquisition() -> None:
    assert held_seconds(None, 1000.0) == 0.0
    assert held_seconds({"holder": None, "acquired_at": 10}, 1000.0) == 0.0
    assert held_seconds({"holder": "refresher:r1", "acquired_at": 400}, 1000.0) == 600.0
    expired = {"holder": "replenisher:x", "acquired_at": 100, "lease_expires_at": 160}
    assert held_seconds(expired, 1000.0) == 900.0  # an abandoned lease is what the alarm is for
