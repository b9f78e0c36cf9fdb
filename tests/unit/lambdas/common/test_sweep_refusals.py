"""The command sweeper against what it cannot trust: a SendMessage SQS throttles or refuses is neither reported
nor stamped as a re-send, and holds no other command back; a ``running`` item with numbers no DynamoDB condition can
carry crashes no tick."""

from __future__ import annotations

from datetime import timedelta

from adapters.dynamo.store import Store
from core.exceptions import AwsRequestError, AwsUnavailableError
from core.model import Command
from lambdas.common.sweep import sweep_commands
from tests.unit.adapters.dynamo.conftest import store  # noqa: F401 - the moto-backed Store fixture, used by name
from tests.unit.lambdas.common.sweep_world import NOW, Log, Sender, drain


def test_a_refused_send_is_neither_counted_nor_stamped_and_holds_no_other_command_back(
    store: Store,  # noqa: F811 - fixture
) -> None:
    """SendMessage throttled (or refused) for one stranded command: it is not reported re-sent, its ``resent_at``
    does not say it was (so the next tick sends it, not one ``COMMAND_SWEEP_SECONDS`` later), and the tick ends
    normally, with the expirations done and the sends it made reported."""

    first, second, late = drain("first"), drain("second"), drain("late", deadline_in=-5)
    for command in (first, second, late):
        store.record_command(command, ttl_seconds=3600, now=NOW - timedelta(seconds=900))

    class Throttled(Sender):
        def send_command(self, command: Command) -> str:
            if command.command_id == "first":
                raise AwsUnavailableError("SQS", "ThrottlingException", "slow down")
            return super().send_command(command)

    sender = Throttled()
    done = sweep_commands(store, sender, NOW, 300, dry_run=False, logger=Log())

    assert "first" not in done["resent"] and done["expired"] == ["late"]
    assert "resent_at" not in store.get_command("first")
    # the next tick, within the period, sends it (the throttle is over)
    again = sweep_commands(store, Sender(), NOW + timedelta(seconds=60), 300, dry_run=False, logger=Log())
    assert "first" in again["resent"]


def test_a_send_sqs_refuses_for_one_command_holds_no_other_back(store: Store) -> None:  # noqa: F811 - fixture

    for command in (drain("first"), drain("second")):
        store.record_command(command, ttl_seconds=3600, now=NOW - timedelta(seconds=900))

    class Refusing(Sender):
        def send_command(self, command: Command) -> str:
            if command.command_id == "first":
                raise AwsRequestError("SQS", "AccessDenied", "not allowed")
            return super().send_command(command)

    sender = Refusing()
    assert sweep_commands(store, sender, NOW, 300, dry_run=False, logger=Log())["resent"] == ["second"]
    assert [c.command_id for c in sender.sent] == ["second"] and "resent_at" not in store.get_command("first")


def test_a_running_item_with_absurd_heartbeat_numbers_neither_crashes_the_sweep_nor_holds_others_back(
    store: Store,  # noqa: F811 - fixture
) -> None:
    """A forged ``running`` item (the agent's role writes these attributes) whose heartbeat and staleness read as
    numbers no DynamoDB condition can carry (``-1e301`` and ``1e300``, stored as strings): taken for unreadable (no
    retake), while the other stranded commands are still sent, tick after tick."""
    forged, stuck = drain("forged"), drain("stuck")
    for command in (forged, stuck):
        store.record_command(command, ttl_seconds=3600, now=NOW - timedelta(seconds=900))
    store.update("CMD#forged", {"status": "running", "heartbeat_at": "-1e301", "stale_after_seconds": "1e300"})
    sender = Sender()

    done = sweep_commands(store, sender, NOW, 300, dry_run=False, logger=Log())

    assert done["resent"] == ["stuck"] and sender.sent == [stuck]
