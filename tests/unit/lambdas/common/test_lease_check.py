"""``lambdas.common.handler.check_lease``: the lock lease checked against the invocation's remaining time."""

import pytest

from core.exceptions import SettingsError
from lambdas.common.handler import check_lease
from localworld.lambda_context import LocalLambdaContext


def test_a_lease_that_outlives_the_invocation_passes() -> None:
    check_lease(120, "LOCK_LEASE_SECONDS", LocalLambdaContext(60, "replenisher"))
    check_lease(10, "LOCK_LEASE_SECONDS", object())  # no remaining time to compare with


def test_a_lease_shorter_than_the_invocation_plus_margin_is_a_settings_error() -> None:
    with pytest.raises(SettingsError) as info:
        check_lease(120, "LOCK_LEASE_SECONDS", LocalLambdaContext(100, "replenisher"))
    assert info.value.name == "LOCK_LEASE_SECONDS" and "remaining time" in str(info.value)
