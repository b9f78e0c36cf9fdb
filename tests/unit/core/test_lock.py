"""The lease rules of ``core.lock``: who may renew, the next fencing value, a lease long enough for an invocation."""

from core.lock import LEASE_MARGIN_SECONDS, fencing_of, lease_too_short, renewable_by


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
