"""The command sweeper: a CMD# stranded ``queued`` (its message dead-lettered after retryable errors) is sent again
as recorded, or expired once its deadline passed; anything started, finished or recent is left alone."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from adapters.dynamo.store import Store
from core.model import Command, CommandKind, CommandStatus, utcnow
from lambdas.common.sweep import EXPIRED, stranded, sweep_commands
from tests.unit.adapters.dynamo.conftest import store  # noqa: F401 - the moto-backed Store fixture, used by name

NOW = utcnow()


def drain(command_id: str, deadline_in: float = 600) -> Command:
    return Command(
        command_id=command_id,
        cluster="demo",
        kind=CommandKind.DRAIN,
        instance_id="i-0123456789abcdef0",
        node_name="n1",
        reason="test",
        deadline=NOW + timedelta(seconds=deadline_in),
    )


def item(command: Command, status: str = "queued", sent_ago: float = 600, **extra: Any) -> dict[str, Any]:
    return {
        "sk": f"CMD#{command.command_id}",
        "command": command.model_dump(mode="json"),
        "status": status,
        "created_at": (NOW - timedelta(seconds=sent_ago)).isoformat(),
        **extra,
    }


def test_stranded_sorts_queued_items_by_age_and_deadline() -> None:
    old, recent, late = drain("old"), drain("recent"), drain("late", deadline_in=-1)
    resent_lately = drain("resent")
    sweep = stranded(
        [
            item(old),
            item(recent, sent_ago=10),
            item(late),
            item(resent_lately, resent_at=(NOW - timedelta(seconds=30)).isoformat()),
            item(drain("running"), status="running"),
            item(drain("done"), status="succeeded"),
            {"sk": "CMD#garbage", "status": "queued", "command": {"kind": "drain"}},
        ],
        NOW,
        300,
    )
    assert sweep.resend == (old,)
    assert sweep.expire == ("late",)
    assert sweep.unreadable == ("CMD#garbage",)


class Sender:
    def __init__(self) -> None:
        self.sent: list[Command] = []

    def send_command(self, command: Command) -> str:
        self.sent.append(command)
        return f"m-{len(self.sent)}"


class Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def warning(self, message: str, **_: Any) -> None:
        self.lines.append(message)


def test_sweep_resends_once_per_period_and_expires_on_the_table(store: Store) -> None:  # noqa: F811 - fixture
    stuck, late = drain("stuck"), drain("late", deadline_in=-5)
    for command in (stuck, late):
        store.record_command(command, ttl_seconds=3600, now=NOW - timedelta(seconds=900))
    sender, log = Sender(), Log()

    done = sweep_commands(store, sender, NOW, 300, dry_run=False, logger=log)

    assert done == {"resent": ["stuck"], "expired": ["late"]}
    assert sender.sent == [stuck]  # exactly as recorded
    assert store.get_command("stuck")["resent_at"] == NOW.isoformat()
    expired = store.get_command("late")
    assert expired["status"] == CommandStatus.TIMED_OUT.value and expired["result"]["message"] == EXPIRED
    # the next tick within the period sends nothing more; a started command is never sent again
    assert sweep_commands(store, sender, NOW + timedelta(seconds=60), 300, dry_run=False, logger=log)["resent"] == []
    store.start_command(stuck, "agent-a:1", 60, 3600, now=NOW + timedelta(seconds=61))
    later = NOW + timedelta(seconds=400)
    assert sweep_commands(store, sender, later, 300, dry_run=False, logger=log) == {"resent": [], "expired": []}
    assert sender.sent == [stuck]


def test_a_dry_run_sweep_changes_nothing(store: Store) -> None:  # noqa: F811 - fixture
    store.record_command(drain("stuck"), ttl_seconds=3600, now=NOW - timedelta(seconds=900))
    sender = Sender()
    assert sweep_commands(store, sender, NOW, 300, dry_run=True, logger=Log())["resent"] == ["stuck"]
    assert sender.sent == [] and "resent_at" not in store.get_command("stuck")
