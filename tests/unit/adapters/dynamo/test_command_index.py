"""The ``ICMD#`` pointers (``adapters.dynamo.command_index``): a Spot warning's look-up reads the instance's pointers
and their commands, not the week of commands, once the index mark says every live command has one (moto's
DynamoDB)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from adapters.dynamo.command_index import (
    INDEX_MARGIN_SECONDS,
    MARK_SK,
    index_complete,
    mark_index,
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


def test_a_fresh_table_is_complete_an_hour_after_its_first_command(store: Store) -> None:
    now = utcnow()
    store.record_command(command("spot-1"), TTL, now=now)
    mark = store.get(MARK_SK) or {}
    assert int(mark["complete_at"]) == to_epoch(now) + INDEX_MARGIN_SECONDS
    assert store.get(pointer_sk(I1, "spot-1")) is not None
    assert not index_complete(store, now)
    assert index_complete(store, now + timedelta(seconds=INDEX_MARGIN_SECONDS))


def test_an_upgraded_table_waits_until_the_commands_before_the_pointers_expired(store: Store) -> None:
    unindexed(store, "old-1")
    now = utcnow()
    store.record_command(command("spot-1"), TTL, now=now)
    assert int((store.get(MARK_SK) or {})["complete_at"]) == to_epoch(now) + INDEX_MARGIN_SECONDS + TTL
    # the mark is the first writer's: another environment's later mark changes nothing
    other = Store(store.table, "demo")
    mark_index(other, 60, now + timedelta(days=1))
    assert int((store.get(MARK_SK) or {})["complete_at"]) == to_epoch(now) + INDEX_MARGIN_SECONDS + TTL
    # until then the whole range answers, the command without a pointer included
    assert ids(commands_for_instance(store, I1)) == ["spot-1", "old-1"]


def test_once_complete_only_the_pointers_and_their_commands_are_read(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    mark_index(store, TTL, utcnow() - timedelta(seconds=INDEX_MARGIN_SECONDS + 1))  # an empty table, an hour ago
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
    mark_index(store, TTL, utcnow() - timedelta(days=1))
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
    later = now + timedelta(seconds=INDEX_MARGIN_SECONDS)
    assert index_complete(store, later) and index_complete(store, later)
    assert reads == [MARK_SK, MARK_SK, MARK_SK]


@pytest.mark.parametrize("value", [None, "soon", True, {"n": 1}])
def test_an_unreadable_mark_is_never_complete(store: Store, value: Any) -> None:
    store.put(MARK_SK, {"complete_at": value} if value is not None else {})
    assert not index_complete(store, utcnow() + timedelta(days=30))
