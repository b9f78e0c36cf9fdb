"""The ``ICMD#`` pointers (``adapters.dynamo.command_index``): a Spot warning's look-up reads the instance's pointers
and their commands, not the week of commands, once the index mark says every live command has one (moto's
DynamoDB)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from adapters.dynamo.command_index import (
    BACKFILL_SECONDS,
    EARLY_BACKFILL_SECONDS,
    EARLY_BACKFILL_WINDOW_SECONDS,
    INDEX_MARGIN_SECONDS,
    MARK_SK,
    POINTER_TTL_MARGIN_SECONDS,
    Backfill,
    backfill_pointers,
    index_complete,
    mark_index,
    open_sk,
    pointer_sk,
)
from adapters.dynamo.commands import commands_for_instance
from adapters.dynamo.store import Store
from core.model import Command, CommandKind, to_epoch, utcnow
from tests.dynamo_reads import answered_sort_keys

I1 = "i-0123456789abcdef0"
I2 = "i-0fedcba9876543210"
TTL = 7 * 86400


def command(cid: str, instance: str = I1, kind: str = "drain") -> Command:
    return Command(
        command_id=cid, cluster="demo", kind=kind, instance_id=instance, deadline=utcnow() + timedelta(seconds=120)
    )


def unindexed(store: Store, cid: str, instance: str = I1) -> None:
    """A command as the code before the pointers recorded it: no pointer."""
    store.put(f"CMD#{cid}", {"status": "succeeded", "instance_id": instance, "kind": "drain", "created_at": "0"})


def ids(items: list[dict[str, Any]]) -> list[str]:
    return [str(item["sk"])[len("CMD#") :] for item in items]


def complete(store: Store) -> None:
    """The index mark as the first command's write left it a TTL and more than an hour ago: complete now."""
    mark_index(store, TTL, utcnow() - timedelta(seconds=TTL + INDEX_MARGIN_SECONDS + 60))


def test_the_index_is_complete_a_ttl_and_an_hour_after_the_first_command(store: Store) -> None:
    unindexed(store, "old-1")  # recorded by the code before the pointers
    now = utcnow()
    store.record_command(command("spot-1"), TTL, now=now)
    done_at = to_epoch(now) + TTL + INDEX_MARGIN_SECONDS
    assert int((store.get(MARK_SK) or {})["complete_at"]) == done_at
    assert store.get(pointer_sk(I1, "spot-1")) is not None and store.get(open_sk("spot-1")) is not None
    # the mark is the first writer's: another environment's later mark changes nothing
    mark_index(Store(store.table, "demo"), 60, now + timedelta(days=1))
    assert int((store.get(MARK_SK) or {})["complete_at"]) == done_at
    # until then the whole range answers, the command without a pointer included
    assert ids(commands_for_instance(store, I1)) == ["spot-1", "old-1"]
    assert not index_complete(store, now + timedelta(seconds=TTL))
    assert index_complete(store, now + timedelta(seconds=TTL + INDEX_MARGIN_SECONDS))


def test_once_complete_only_the_pointers_and_their_commands_are_read(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    complete(store)
    store.record_command(command("spot-1"), TTL, now=utcnow() - timedelta(minutes=5))
    store.record_command(command("cordon-1", kind="cordon"), TTL)
    for n in range(5):  # a week of other instances' commands
        store.record_command(command(f"refresh-{n}", instance=I2), TTL)
    unindexed(store, "old-1")  # what the mark says cannot be live any more: not read
    answered = answered_sort_keys(monkeypatch, store.table)
    assert ids(commands_for_instance(store, I1)) == ["cordon-1", "spot-1"]  # newest first
    assert answered == [pointer_sk(I1, "cordon-1"), pointer_sk(I1, "spot-1")]  # no CMD# item queried
    assert ids(commands_for_instance(store, I1, CommandKind.CORDON)) == ["cordon-1"]
    assert sorted(ids(commands_for_instance(store, I2))) == [f"refresh-{n}" for n in range(5)]


def test_a_pointer_answers_only_a_command_that_names_its_instance(store: Store) -> None:
    complete(store)
    store.record_command(command("spot-1", instance=I2), TTL)
    store.put(pointer_sk(I1, "spot-1"), {"command_id": "spot-1"})  # forged: the command names another instance
    store.put(pointer_sk(I1, "gone"), {"command_id": "gone"})  # its command never written (or expired)
    assert commands_for_instance(store, I1) == []
    assert ids(commands_for_instance(store, I2)) == ["spot-1"]


def test_the_mark_is_read_until_complete_then_remembered(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    now = utcnow()
    mark_index(store, TTL, now)
    reads: list[str] = []
    real = store.table.get_item

    def get_item(**kwargs: Any) -> Any:
        reads.append(kwargs["Key"]["sk"])
        return real(**kwargs)

    monkeypatch.setattr(store.table, "get_item", get_item)
    assert not index_complete(store, now) and not index_complete(store, now)
    assert reads == [MARK_SK, MARK_SK]
    later = now + timedelta(seconds=TTL + INDEX_MARGIN_SECONDS)
    assert index_complete(store, later) and index_complete(store, later)
    assert reads == [MARK_SK, MARK_SK, MARK_SK]


@pytest.mark.parametrize("value", [None, "soon", True, {"n": 1}])
def test_an_unreadable_mark_is_never_complete(store: Store, value: Any) -> None:
    store.put(MARK_SK, {"complete_at": value} if value is not None else {})
    assert not index_complete(store, utcnow() + timedelta(days=30))


def test_an_open_pointer_written_again_since_it_was_read_is_not_deleted(store: Store) -> None:
    """A command recorded again under its id (a retry after a crash left its pointer alone): the sweep read the old
    pointer as an orphan, the retry wrote it again; the delete conditioned on what was read deletes nothing."""
    from adapters.dynamo.command_index import delete_open_pointer, open_commands

    complete(store)
    old = (utcnow() - timedelta(hours=2)).isoformat()
    store.put(open_sk("retried"), {"command_id": "retried", "created_at": old})
    _, stale = open_commands(store, utcnow())
    assert [p["sk"] for p in stale] == [open_sk("retried")]
    store.record_command(command("retried"), TTL)  # the retry: its pointers again, then the command
    assert delete_open_pointer(store, stale[0]) is False
    assert store.get(open_sk("retried")) is not None
    assert open_commands(store, utcnow())[1] == []  # open now, and its pointer stays


def rolled_back(store: Store, cid: str, instance: str = I1, status: str = "queued") -> int:
    """A command as a version without pointers records it (a rollback): no pointer, no ``indexed``; returns its
    ``expires_at``."""
    expires = to_epoch(utcnow()) + TTL
    store.put(
        f"CMD#{cid}",
        {
            "status": status,
            "instance_id": instance,
            "kind": "drain",
            "created_at": utcnow().isoformat(),
            "expires_at": expires,
        },
    )
    return expires


def test_commands_recorded_by_a_version_without_pointers_get_them_at_the_next_backfill(store: Store) -> None:
    complete(store)
    now = utcnow()
    store.record_command(command("spot-1"), TTL, now=now)  # written with its pointers: never backfilled
    assert store.get("CMD#spot-1", consistent=True)["indexed"] is True  # type: ignore[index]
    expires = rolled_back(store, "rb-open")
    rolled_back(store, "rb-done", instance=I2, status="succeeded")
    store.put("CMD#rb-nameless", {"status": "queued"})  # names no instance: nothing to point to it
    assert ids(commands_for_instance(store, I1)) == ["spot-1"]  # unseen: no pointer

    assert backfill_pointers(store, now) == Backfill(pointed=("rb-done", "rb-open"))
    assert ids(commands_for_instance(store, I1)) == ["rb-open", "spot-1"]
    assert ids(commands_for_instance(store, I2)) == ["rb-done"]
    assert store.get(open_sk("rb-open")) is not None
    assert store.get(open_sk("rb-done")) is None  # ended: the sweep has nothing to look at
    pointer = store.get(pointer_sk(I1, "rb-open")) or {}
    assert int(pointer["expires_at"]) == expires + POINTER_TTL_MARGIN_SECONDS
    assert store.get("CMD#rb-open", consistent=True)["indexed"] is True  # type: ignore[index]
    assert store.get("CMD#rb-nameless", consistent=True) == {  # left as it was
        "pk": "CLUSTER#demo#AGENT",
        "sk": "CMD#rb-nameless",
        "status": "queued",
    }
    # a new environment finds nothing more to do: every command is stamped
    assert backfill_pointers(Store(store.table, "demo"), now) == Backfill()


def test_a_backfill_is_due_at_an_environments_first_tick_every_5_minutes_in_its_first_hour_then_every_half_hour(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    complete(store)
    now = utcnow()
    at = lambda seconds: now + timedelta(seconds=seconds)  # noqa: E731
    assert backfill_pointers(store, now) == Backfill()
    rolled_back(store, "rb-1")  # a function of the old version still recording during the deployment
    answered = answered_sort_keys(monkeypatch, store.table)
    assert backfill_pointers(store, at(EARLY_BACKFILL_SECONDS - 1)) == Backfill()
    assert answered == []  # not due: not even read
    assert backfill_pointers(store, at(EARLY_BACKFILL_SECONDS)).pointed == ("rb-1",)
    assert backfill_pointers(store, at(EARLY_BACKFILL_WINDOW_SECONDS)) == Backfill()  # an hour in: half-hourly now
    rolled_back(store, "rb-2")
    assert backfill_pointers(store, at(EARLY_BACKFILL_WINDOW_SECONDS + EARLY_BACKFILL_SECONDS)) == Backfill()
    assert backfill_pointers(store, at(EARLY_BACKFILL_WINDOW_SECONDS + BACKFILL_SECONDS - 1)) == Backfill()
    assert backfill_pointers(store, at(EARLY_BACKFILL_WINDOW_SECONDS + BACKFILL_SECONDS)).pointed == ("rb-2",)


def test_a_backfill_past_its_bound_goes_on_at_the_next_call_and_a_dry_run_writes_nothing(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    complete(store)
    now = utcnow()
    for n in range(3):
        rolled_back(store, f"rb-{n}")
    monkeypatch.setattr("adapters.dynamo.command_index.MAX_BACKFILLED", 2)
    dry = Store(store.table, "demo")
    assert backfill_pointers(dry, now, dry_run=True) == Backfill(pointed=("rb-0", "rb-1"))
    assert ids(commands_for_instance(store, I1)) == []
    assert backfill_pointers(dry, now, dry_run=True) == Backfill()  # said once: not read again each tick
    assert backfill_pointers(store, now).pointed == ("rb-0", "rb-1")
    assert backfill_pointers(store, now).pointed == ("rb-2",)  # due again at once: the first stopped at the bound
    assert backfill_pointers(store, now) == Backfill()
    assert sorted(ids(commands_for_instance(store, I1))) == ["rb-0", "rb-1", "rb-2"]


def test_a_command_with_pointers_but_no_stamp_is_only_stamped(store: Store) -> None:
    """An upgrade from the versions that wrote pointers before commands carried ``indexed``: nothing to write but the
    stamp, and nothing reported as a rollback."""
    complete(store)
    now = utcnow()
    store.record_command(command("pre-stamp"), TTL, now=now - timedelta(hours=1))
    store.update("CMD#pre-stamp", {"indexed": None})  # as those versions recorded it
    before = (store.get(pointer_sk(I1, "pre-stamp")), store.get(open_sk("pre-stamp")))
    assert backfill_pointers(Store(store.table, "demo"), now, dry_run=True) == Backfill(stamped=("pre-stamp",))
    assert backfill_pointers(store, now) == Backfill(stamped=("pre-stamp",))
    assert (store.get(pointer_sk(I1, "pre-stamp")), store.get(open_sk("pre-stamp"))) == before  # not written again
    assert store.get("CMD#pre-stamp", consistent=True)["indexed"] is True  # type: ignore[index]


def test_forged_commands_are_refused_or_bounded_and_never_stop_the_backfill(store: Store) -> None:
    """Anything that can write the agent partition can forge a ``CMD#`` item: one naming no instance id (1,100
    characters would make a pointer key DynamoDB refuses) is left alone, an ``expires_at`` no TTL attribute is
    (1E+100, a bool, a string) gives the pointer one from now, and the commands after them still get theirs."""
    from decimal import Decimal

    complete(store)
    now = utcnow()
    store.put("CMD#a-long", {"status": "queued", "instance_id": "i-" + "f" * 1100})
    store.put("CMD#a" + "x" * 900, {"status": "queued", "instance_id": I1})  # a pointer key over 1,024 bytes
    store.put("CMD#a-listed", {"status": ["queued"], "instance_id": I2})  # no status: a finished one's pointer
    store.put("CMD#b-huge", {"status": "queued", "instance_id": I1, "expires_at": Decimal("1E+100")})
    store.put("CMD#c-bool", {"status": "queued", "instance_id": I1, "expires_at": True})
    store.put("CMD#d-text", {"status": "queued", "instance_id": I1, "expires_at": "soon"})
    store.put("CMD#e-negative", {"status": "queued", "instance_id": I1, "expires_at": -5})
    expires = rolled_back(store, "f-real")
    assert backfill_pointers(store, now) == Backfill(
        pointed=("a-listed", "b-huge", "c-bool", "d-text", "e-negative", "f-real")
    )
    fallback = to_epoch(now) + POINTER_TTL_MARGIN_SECONDS
    for cid in ("b-huge", "c-bool", "d-text", "e-negative"):
        assert int((store.get(pointer_sk(I1, cid)) or {})["expires_at"]) == fallback
    assert int((store.get(pointer_sk(I1, "f-real")) or {})["expires_at"]) == expires + POINTER_TTL_MARGIN_SECONDS
    assert "indexed" not in (store.get("CMD#a-long", consistent=True) or {})  # left as it was
    assert store.get(open_sk("a-listed")) is None and store.get(pointer_sk(I2, "a-listed")) is not None


def test_a_write_dynamodb_refuses_leaves_that_command_and_goes_on(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from core.exceptions import AwsRequestError

    complete(store)
    now = utcnow()
    rolled_back(store, "a-refused")
    rolled_back(store, "b-fine")
    put = store.put

    def refusing(sk: str, attrs: dict[str, Any], **kwargs: Any) -> None:
        if "a-refused" in sk:
            raise AwsRequestError("DynamoDB", "ValidationException", "refused")
        put(sk, attrs, **kwargs)

    monkeypatch.setattr(store, "put", refusing)
    assert backfill_pointers(store, now) == Backfill(pointed=("b-fine",), refused=("a-refused",))
    assert "indexed" not in (store.get("CMD#a-refused", consistent=True) or {})  # asked again at the next backfill


def test_a_command_deleted_while_its_pointers_are_written_is_not_made_again(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    complete(store)
    now = utcnow()
    rolled_back(store, "expiring", status="succeeded")
    put = store.put

    def expiring_meanwhile(sk: str, attrs: dict[str, Any], **kwargs: Any) -> None:
        put(sk, attrs, **kwargs)
        store.delete("CMD#expiring")  # its TTL took it between the pointer and the stamp

    monkeypatch.setattr(store, "put", expiring_meanwhile)
    assert backfill_pointers(store, now).pointed == ("expiring",)
    assert store.get("CMD#expiring", consistent=True) is None  # no stub with only ``indexed``


def test_an_open_command_whose_instance_pointer_is_there_still_gets_its_open_pointer(store: Store) -> None:
    """A forged (or left) ``ICMD#`` pointer does not make a rolled-back open command look pointed: the sweep reads
    the open ones through ``OCMD#``."""
    complete(store)
    now = utcnow()
    rolled_back(store, "rb-open")
    store.put(pointer_sk(I1, "rb-open"), {"command_id": "rb-open", "created_at": now.isoformat(), "expires_at": 1})
    assert backfill_pointers(store, now) == Backfill(pointed=("rb-open",))
    assert store.get(open_sk("rb-open")) is not None
