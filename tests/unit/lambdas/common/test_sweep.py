"""The command sweeper: a CMD# stranded ``queued`` (its message dead-lettered after retryable errors) is sent again
as recorded, or expired once its deadline passed; one ``running`` under a stale heartbeat (its worker died, its
message gone) is sent again before its deadline; anything running under a live worker, finished or recent is left
alone."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest

from adapters.dynamo.store import Store
from core.model import Command, CommandStatus
from lambdas.common.sweep import EXPIRED, stranded, sweep_commands
from tests.dynamo_reads import answered_sort_keys
from tests.unit.adapters.dynamo.conftest import store  # noqa: F401 - the moto-backed Store fixture, used by name
from tests.unit.lambdas.common.sweep_world import NOW, Log, Sender, drain


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


def test_a_time_with_no_zone_is_read_as_absent_never_raised() -> None:
    naive = (NOW - timedelta(seconds=10)).replace(tzinfo=None).isoformat()  # recent, were it read
    beat = NOW.timestamp() - 600
    queued, running, tightened = drain("queued"), drain("running"), drain("tightened")
    sweep = stranded(
        [
            item(queued, created_at=naive),  # as if never sent: sent again
            item(running, "running", heartbeat_at=beat, stale_after_seconds=60, resent_at=naive),  # never re-sent
            item(tightened, "running", heartbeat_at=beat, stale_after_seconds=60, deadline_tightened_to=naive),
        ],
        NOW,
        300,
    )
    assert sweep.resend == (queued,)
    assert [command for command, _ in sweep.retake] == [running, tightened]  # the recorded deadline stands


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
    # the next tick within the period sends nothing more; a command started by a live worker is never sent again
    assert sweep_commands(store, sender, NOW + timedelta(seconds=60), 300, dry_run=False, logger=log)["resent"] == []
    attempt = store.start_command(stuck, "agent-a:1", 60, 3600, now=NOW + timedelta(seconds=61))
    store.heartbeat_command("stuck", "agent-a:1", attempt, now=NOW + timedelta(seconds=390))
    later = NOW + timedelta(seconds=400)
    assert sweep_commands(store, sender, later, 300, dry_run=False, logger=log) == {"resent": [], "expired": []}
    assert sender.sent == [stuck]


def test_stranded_resends_a_running_command_only_once_its_heartbeat_is_stale_by_its_own_measure() -> None:
    beat = NOW.timestamp()
    dead, alive, slow_agent, late = drain("dead"), drain("alive"), drain("slow"), drain("late", deadline_in=-1)
    tightened, resent, no_beat = drain("tightened"), drain("resent"), drain("no-beat")
    sweep = stranded(
        [
            item(dead, "running", heartbeat_at=beat - 61, stale_after_seconds=60),
            item(alive, "running", heartbeat_at=beat - 59, stale_after_seconds=60),
            # an agent with STALE_RUNNING_SECONDS=600 takes no item over before 600 s: nor does the sweep send it
            item(slow_agent, "running", heartbeat_at=beat - 300, stale_after_seconds=600),
            item(late, "running", heartbeat_at=beat - 600, stale_after_seconds=60),
            item(
                tightened,
                "running",
                heartbeat_at=beat - 600,
                stale_after_seconds=60,
                deadline_tightened_to=(NOW - timedelta(seconds=1)).isoformat(),
            ),
            item(
                resent,
                "running",
                heartbeat_at=beat - 600,
                stale_after_seconds=60,
                resent_at=(NOW - timedelta(seconds=299)).isoformat(),
            ),
            item(no_beat, "running"),
        ],
        NOW,
        300,
    )
    assert sweep.retake == ((dead, beat - 60),)
    assert sweep.resend == () and sweep.expire == ()
    # an item started before the staleness was recorded: the sweep's own period stands in for it
    legacy = stranded([item(dead, "running", heartbeat_at=beat - 301)], NOW, 300)
    assert [command for command, _ in legacy.retake] == [dead]
    assert stranded([item(dead, "running", heartbeat_at=beat - 299)], NOW, 300).retake == ()


def test_a_re_send_a_start_took_does_not_hold_back_the_retake_of_its_dead_worker() -> None:
    """Re-sent while queued (or by an earlier retake) 100 s ago, started 90 s ago, its worker dead since: the re-send
    was taken, so the command is retaken now, not 300 s after that re-send (helper-142: up to 5 minutes orphaned)."""
    beat, dead = NOW.timestamp(), drain("dead")
    resent, started = (NOW - timedelta(seconds=100)).isoformat(), (NOW - timedelta(seconds=90)).isoformat()
    taken = item(dead, "running", heartbeat_at=beat - 80, stale_after_seconds=60, resent_at=resent, started_at=started)
    assert stranded([taken], NOW, 300).retake == ((dead, beat - 60),)
    # a re-send after the start (this retake's own, not yet taken) holds the next one back for the period
    waiting = {**taken, "resent_at": (NOW - timedelta(seconds=30)).isoformat()}
    assert stranded([waiting], NOW, 300).retake == ()
    assert stranded([{**taken, "started_at": None}], NOW, 300).retake == ()  # no start time read: as before


def test_a_running_command_whose_worker_died_is_sent_again_and_taken_over(store: Store) -> None:  # noqa: F811
    """Its worker died mid-drain and its message is gone (dead-lettered, or deleted as a redundant copy): the sweep
    sends it again as recorded, once per period, and the agent that receives it takes it over (attempt 2)."""
    stuck = drain("stuck")
    store.record_command(stuck, ttl_seconds=3600, now=NOW - timedelta(seconds=300))
    attempt = store.start_command(stuck, "agent-a:1", 60, 3600, now=NOW - timedelta(seconds=200), message_id="m-1")
    assert store.get_command("stuck")["stale_after_seconds"] == 60
    store.heartbeat_command("stuck", "agent-a:1", attempt, now=NOW - timedelta(seconds=61))
    sender, log = Sender(), Log()

    assert sweep_commands(store, sender, NOW, 300, dry_run=False, logger=log) == {"resent": ["stuck"], "expired": []}
    assert sender.sent == [stuck] and store.get_command("stuck")["resent_at"] == NOW.isoformat()
    # within the period: not again; the agent that receives it takes it over
    assert sweep_commands(store, sender, NOW + timedelta(seconds=120), 300, dry_run=False, logger=log)["resent"] == []
    assert store.start_command(stuck, "agent-b:1", 60, 3600, now=NOW + timedelta(seconds=5), message_id="m-2") == 2
    assert sweep_commands(store, sender, NOW + timedelta(seconds=30), 300, dry_run=False, logger=log)["resent"] == []
    assert sender.sent == [stuck]


def test_a_worker_beating_between_the_read_and_the_resend_keeps_its_command(store: Store) -> None:  # noqa: F811
    stuck = drain("stuck")
    store.record_command(stuck, ttl_seconds=3600, now=NOW - timedelta(seconds=300))
    attempt = store.start_command(stuck, "agent-a:1", 60, 3600, now=NOW - timedelta(seconds=200))
    items = store.query_prefix("CMD#", consistent=True)
    store.heartbeat_command("stuck", "agent-a:1", attempt, now=NOW)  # alive after all
    sender = Sender()

    class Frozen:
        """The store as the sweep read it before the heartbeat (the conditional write then sees the new one); no
        command index mark (the range is read)."""

        def __init__(self) -> None:
            self.memo: dict[str, bool] = {}

        def get(self, sk: str, consistent: bool = True) -> Any:
            return None

        def query_range(self, *_: Any, **__: Any) -> Any:
            return items

        def update(self, *args: Any, **kwargs: Any) -> Any:
            return store.update(*args, **kwargs)

    assert sweep_commands(Frozen(), sender, NOW, 300, dry_run=False, logger=Log())["resent"] == []  # type: ignore[arg-type]
    assert sender.sent == [] and "resent_at" not in store.get_command("stuck")


def test_a_dry_run_sweep_changes_nothing(store: Store) -> None:  # noqa: F811 - fixture
    store.record_command(drain("stuck"), ttl_seconds=3600, now=NOW - timedelta(seconds=900))
    sender = Sender()
    assert sweep_commands(store, sender, NOW, 300, dry_run=True, logger=Log())["resent"] == ["stuck"]
    assert sender.sent == [] and "resent_at" not in store.get_command("stuck")


class Untouchable(dict[str, Any]):
    """A finished command's item as the table answered: reading its status is fine, converting it is not."""

    def items(self) -> Any:
        raise AssertionError("a finished command's item was converted")


def test_only_queued_and_running_items_are_converted() -> None:
    queued = drain("queued")
    raw_queued = item(queued) | {"attempt": Decimal("1")}
    asked: dict[str, Any] = {}

    class Raw:
        """The table's answer: numbers as Decimal, a finished item and one whose status is not a string; no command
        index mark (the range is read)."""

        def __init__(self) -> None:
            self.memo: dict[str, bool] = {}

        def get(self, sk: str, consistent: bool = True) -> Any:
            return None

        def query_range(
            self, low: str, high: str, consistent: bool = False, keep: Any = None, convert: bool = True
        ) -> Any:
            asked.update(low=low, high=high, convert=convert)
            # as if DynamoDB had not applied the filter: the sweep's own test still holds
            done = Untouchable(item(drain("done"), status="succeeded"))
            odd = Untouchable({"sk": "CMD#odd", "status": ["queued"]})
            return iter([done, odd, raw_queued] if not convert else [])

    sweep = sweep_commands(Raw(), Sender(), NOW, 300, dry_run=True, logger=Log())  # type: ignore[arg-type]
    assert asked == {"low": "CMD#", "high": "CMD$", "convert": False}
    assert sweep == {"resent": ["queued"], "expired": []}


def test_the_finished_commands_are_not_answered(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    store.record_command(drain("stuck"), ttl_seconds=3600, now=NOW - timedelta(seconds=900))
    store.put("CMD#done", {"status": "succeeded", "instance_id": "i-1"})
    store.put("HOOK#i-1", {"status": "queued"})  # another kind, never read
    answered = answered_sort_keys(monkeypatch, store.table)
    assert sweep_commands(store, Sender(), NOW, 300, dry_run=True, logger=Log())["resent"] == ["stuck"]
    assert answered == ["CMD#stuck"]


def test_once_the_command_index_is_complete_only_open_pointers_and_their_commands_are_read(
    store: Store,  # noqa: F811 - fixture
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from adapters.dynamo.command_index import mark_index, open_sk

    mark_index(store, 3600, NOW - timedelta(hours=3))  # written a TTL (3600 s here) and more than an hour ago
    stuck, late, done, live = drain("stuck"), drain("late", deadline_in=-5), drain("done"), drain("live")
    for command in (stuck, late, done, live):
        store.record_command(command, ttl_seconds=3600, now=NOW - timedelta(seconds=900))
    attempt = store.start_command(done, "agent-a:1", 60, 3600, now=NOW - timedelta(seconds=800))
    store.finish_command("done", "agent-a:1", attempt, CommandStatus.SUCCEEDED, {}, now=NOW - timedelta(seconds=700))
    store.start_command(live, "agent-a:1", 600, 3600, now=NOW - timedelta(seconds=30))
    # pointers whose command never came (a writer crashed), one dated ahead (forged)
    for name, age in (("young", 60), ("old", 4000), ("ahead", -4000)):
        store.put(open_sk(f"ghost-{name}"), {"created_at": (NOW - timedelta(seconds=age)).isoformat()})
    answered = answered_sort_keys(monkeypatch, store.table)
    sender = Sender()

    dry = sweep_commands(store, sender, NOW, 300, dry_run=True, logger=Log())
    stale = ["OCMD#done", "OCMD#ghost-ahead", "OCMD#ghost-old"]
    assert dry == {"resent": ["stuck"], "expired": ["late"], "pointers_deleted": stale}
    assert answered and all(sk.startswith("OCMD#") for sk in answered)  # no CMD# item queried: got one by one
    assert store.get(open_sk("done")) is not None and sender.sent == []  # a dry run deletes nothing

    swept = sweep_commands(store, sender, NOW, 300, dry_run=False, logger=Log())
    assert swept == dry and sender.sent == [stuck]
    assert all(store.get(sk) is None for sk in stale)
    assert store.get(open_sk("ghost-young")) is not None  # its command may still be being written
    # the expired one ended: its pointer goes at the next sweep; the open ones stay
    later = sweep_commands(store, sender, NOW + timedelta(seconds=60), 300, dry_run=False, logger=Log())
    assert later == {"resent": [], "expired": [], "pointers_deleted": ["OCMD#late"]}
    assert {str(i["sk"]) for i in store.query_prefix("OCMD#", consistent=True)} == {
        "OCMD#ghost-young",
        "OCMD#live",
        "OCMD#stuck",
    }


def test_a_command_recorded_without_pointers_is_backfilled_and_swept_in_the_same_tick(
    store: Store,  # noqa: F811 - fixture
) -> None:
    from adapters.dynamo.command_index import mark_index, open_sk

    mark_index(store, 3600, NOW - timedelta(hours=3))  # complete
    stuck = drain("stuck")
    # recorded by a version without pointers (a rollback), stranded since: no OCMD# pointer, no ``indexed``
    store.put("CMD#stuck", item(stuck, sent_ago=900) | {"instance_id": stuck.instance_id, "kind": "drain"})
    sender, log = Sender(), Log()
    swept = sweep_commands(store, sender, NOW, 300, dry_run=False, logger=log)
    assert swept == {"resent": ["stuck"], "expired": [], "pointers_backfilled": ["stuck"]}
    assert sender.sent == [stuck] and store.get(open_sk("stuck")) is not None
    assert any("without pointers" in line for line in log.lines)
    # the next tick reads it through its pointer (not due to backfill again)
    later = sweep_commands(store, sender, NOW + timedelta(seconds=400), 300, dry_run=False, logger=log)
    assert later == {"resent": ["stuck"], "expired": []}


def test_a_backfill_dynamodb_refuses_is_logged_and_the_sweep_goes_on(
    store: Store,  # noqa: F811 - fixture
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from adapters.dynamo.command_index import mark_index
    from core.exceptions import AwsRequestError

    mark_index(store, 3600, NOW - timedelta(hours=3))  # complete
    stuck = drain("stuck")
    store.record_command(stuck, 3600, now=NOW - timedelta(seconds=900))  # with its pointers: swept through them
    query_range = store.query_range
    asked: list[Any] = []

    def refusing(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("keep") is not None:  # the backfill's read (IAM without Query on the range, say)
            asked.append(args)
            raise AwsRequestError("DynamoDB", "AccessDeniedException", "not allowed")
        return query_range(*args, **kwargs)

    monkeypatch.setattr(store, "query_range", refusing)
    sender, log = Sender(), Log()
    assert sweep_commands(store, sender, NOW, 300, dry_run=False, logger=log) == {"resent": ["stuck"], "expired": []}
    assert sender.sent == [stuck]
    assert any("DynamoDB refused the read" in line for line in log.lines)
    # remembered: not asked again at every tick, but as an environment's first hour asks (every 5 minutes)
    sweep_commands(store, sender, NOW + timedelta(seconds=60), 300, dry_run=False, logger=log)
    assert len(asked) == 1
    sweep_commands(store, sender, NOW + timedelta(seconds=300), 300, dry_run=False, logger=log)
    assert len(asked) == 2
