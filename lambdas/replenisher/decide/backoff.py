"""Rule 2, the failure record: a launch failure updates its group's ``Backoff``. Pure."""

from __future__ import annotations

from datetime import datetime

from core.kops import Role
from core.ledger import Backoff
from core.settings import ReplenisherSettings
from lambdas.events.event import Event
from lambdas.replenisher.decide.builder import Builder
from lambdas.replenisher.plan import Reason


def record_failure(backoff: Backoff, at: datetime, settings: ReplenisherSettings) -> Backoff:
    """The backoff after a launch failure at ``at`` (rule 2 of the module docstring). Pure.

    >>> from datetime import timezone
    >>> s = ReplenisherSettings(cluster_name="c", table_name="t", queue_url="q")
    >>> t0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    >>> b = record_failure(Backoff(), t0, s); b.window_seconds, b.streak
    (300, 1)
    >>> b = record_failure(b, t0 + timedelta(seconds=20), s); b.window_seconds, b.streak  # a retry: same window
    (300, 1)
    >>> b = record_failure(b, t0 + timedelta(minutes=10), s); b.window_seconds, b.streak  # failed again: doubled
    (600, 2)
    >>> record_failure(b, t0 + timedelta(hours=4), s).window_seconds  # after 3 h clean: starts over
    300
    """
    last = backoff.last_failure_at
    if last is not None and at < last:
        return backoff  # an older, late-delivered failure: already covered
    if last is None or (at - last).total_seconds() >= settings.backoff_reset_seconds:
        return Backoff(last_failure_at=at, window_seconds=settings.backoff_initial_seconds, streak=1)
    if backoff.in_backoff(at):
        return backoff.model_copy(update={"last_failure_at": at})
    window = min(max(backoff.window_seconds, settings.backoff_initial_seconds) * 2, settings.backoff_max_seconds)
    return Backoff(last_failure_at=at, window_seconds=window, streak=backoff.streak + 1)


def record_launch_failure(b: Builder, notice: Event) -> None:
    assert notice.asg_name is not None
    group = b.world.groups[notice.asg_name]
    ledger = b.ledger(group.name)
    update: dict[str, object] = {"backoff": record_failure(ledger.backoff, notice.event_time, b.settings)}
    comp = ledger.compensation
    if comp is not None and comp.healthy_since is not None and notice.event_time >= comp.healthy_since:
        # a failure after the group was seen healthy restarts the hold (flapping); one from before it (delivered late,
        # or again) was over when the group was seen healthy, and its backoff already counts it
        update["compensation"] = comp.model_copy(update={"healthy_since": None})
    b.write(
        ledger.model_copy(update=update),
        f"launch failure at {notice.event_time.isoformat()}: {notice.status_message or 'no message'}",
    )
    if group.role is Role.CONTROL_PLANE:
        b.note(Reason.CONTROL_PLANE, f"{group.name} is a control-plane group: never compensated in another AZ")
    elif group.role is not Role.NODE:
        b.note(Reason.UNKNOWN_ROLE, f"{group.name} has no kOps role tag: treated like a control-plane group")
