"""The backoff of a group whose launches fail (rule 2)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from core.ledger import Backoff
from core.settings import ReplenisherSettings
from lambdas.replenisher.decide.backoff import record_failure

T0 = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)
SETTINGS = ReplenisherSettings(cluster_name="c", table_name="t", queue_url="q")


def test_backoff_window_grows_and_resets() -> None:
    b = record_failure(Backoff(), T0, SETTINGS)
    assert b.in_backoff(T0 + timedelta(minutes=4)) and not b.in_backoff(T0 + timedelta(minutes=6))
    for _ in range(5):  # fails again each time right after the window ended
        b = record_failure(b, b.until + timedelta(seconds=1), SETTINGS)
    assert b.window_seconds == SETTINGS.backoff_max_seconds
    assert record_failure(b, b.last_failure_at - timedelta(minutes=1), SETTINGS) == b  # a late event changes nothing
