"""Control-plane drain slots (``CPDRAIN#<n>`` items) on moto's DynamoDB: at most ``slots`` held at once whoever
claims, the same command takes its own slot again, an expired slot is free, a release gives back only its own."""

from __future__ import annotations

import threading
from datetime import timedelta

from adapters.dynamo.controlplane import PREFIX, ControlPlaneSlots, slot_of
from adapters.dynamo.store import Store
from core.model import utcnow

NOW = utcnow()
LATER = NOW + timedelta(minutes=10)


def held(store: Store) -> dict[str, str]:
    return {item["sk"]: item["command_id"] for item in store.query_prefix(PREFIX, consistent=True)}


def test_one_slot_one_holder_and_the_same_command_takes_it_again(store: Store) -> None:
    slots = ControlPlaneSlots(store)
    assert slots.claim("refresh-r1-0", "i-a", "agent-a:1", 1, LATER, NOW).slot == 0
    other = slots.claim("spot-b", "i-b", "agent-b:2", 1, LATER, NOW)
    assert other.slot is None and other.holders == ("refresh-r1-0",)
    again = slots.claim("refresh-r1-0", "i-a", "agent-c:3", 1, LATER, NOW)  # its next worker, after a take-over
    assert again.slot == 0
    assert held(store) == {"CPDRAIN#0": "refresh-r1-0"}
    item = store.get("CPDRAIN#0")
    assert item is not None and item["worker"] == "agent-c:3" and item["instance_id"] == "i-a"


def test_two_slots_take_two_commands_and_no_third(store: Store) -> None:
    slots = ControlPlaneSlots(store)
    assert slots.claim("a", "i-a", "w", 2, LATER, NOW).slot == 0
    assert slots.claim("b", "i-b", "w", 2, LATER, NOW).slot == 1
    assert slots.claim("c", "i-c", "w", 2, LATER, NOW).slot is None
    assert slots.claim("b", "i-b", "w", 2, LATER, NOW).slot == 1  # its own, not a second one


def test_an_expired_slot_is_free(store: Store) -> None:
    slots = ControlPlaneSlots(store)
    slots.claim("dead", "i-a", "agent-a:1", 1, NOW + timedelta(seconds=5), NOW)
    assert slots.claim("next", "i-b", "w", 1, LATER, NOW + timedelta(seconds=4)).slot is None
    assert slots.claim("next", "i-b", "w", 1, LATER, NOW + timedelta(seconds=7)).slot == 0
    assert held(store) == {"CPDRAIN#0": "next"}


def test_release_gives_back_only_its_own_slot(store: Store) -> None:
    slots = ControlPlaneSlots(store)
    slots.claim("a", "i-a", "w", 2, LATER, NOW)
    slots.claim("b", "i-b", "w", 2, LATER, NOW)
    assert slots.release("a") == 1
    assert slots.release("a") == 0
    assert held(store) == {"CPDRAIN#1": "b"}
    assert slots.claim("c", "i-c", "w", 2, LATER, NOW).slot == 0


def test_an_item_that_is_no_slot_is_skipped_and_named(store: Store) -> None:
    # a suffix that is no number, not as slot_sk writes it, or at or above the slots: none raises, none is a slot
    for junk in ("x", "01", "2", "-1", "\u0661", ""):
        store.put(f"{PREFIX}{junk}", {"command_id": "a", "expires_at": 0})
    slots = ControlPlaneSlots(store)
    got = slots.claim("a", "i-a", "w", 2, LATER, NOW)
    assert got.slot == 0 and sorted(got.ignored) == sorted(
        f"{PREFIX}{junk}" for junk in ("x", "01", "2", "-1", "\u0661", "")
    )
    assert slots.claim("b", "i-b", "w", 2, LATER, NOW).slot == 1
    assert slots.claim("c", "i-c", "w", 2, LATER, NOW).slot is None


def test_slot_of_reads_only_what_slot_sk_writes() -> None:
    assert [slot_of(f"{PREFIX}{n}", 3) for n in (0, 2, 3, 10)] == [0, 2, None, None]
    assert [slot_of(sk, 3) for sk in ("CPDRAIN#x", "CPDRAIN#01", "CPDRAIN#+1", "CPDRAIN# 1", "HOOK#1", "")] == [
        None
    ] * 6


def test_of_many_claimers_at_once_exactly_one_wins_the_last_slot(store: Store) -> None:
    slots = ControlPlaneSlots(store)
    won: list[str] = []
    start = threading.Barrier(8)

    def claim(name: str) -> None:
        start.wait()
        if slots.claim(name, f"i-{name}", name, 1, LATER, NOW).slot is not None:
            won.append(name)

    threads = [threading.Thread(target=claim, args=(f"c{n}",)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(won) == 1 and held(store) == {"CPDRAIN#0": won[0]}


def test_a_release_by_worker_leaves_a_slot_the_next_worker_renewed_between_its_read_and_its_delete(
    store: Store,
) -> None:
    # agent-a reads the slot under its own name; before its delete, agent-b (its command's next worker) renews it:
    # the delete is conditional on the worker too, so agent-b's drain keeps it; without a worker every slot of the
    # command goes, whoever renewed it
    slots = ControlPlaneSlots(store)
    slots.claim("lifecycle-ev-1", "i-m", "agent-a:1", 1, LATER, NOW)
    read = list(store.query_prefix(PREFIX, consistent=True))
    slots.claim("lifecycle-ev-1", "i-m", "agent-b:2", 1, LATER, NOW)
    stale = ControlPlaneSlots(store)
    stale.table = _Frozen(store, read)  # type: ignore[assignment]
    assert stale.release("lifecycle-ev-1", "agent-a:1") == 0
    assert held(store) == {"CPDRAIN#0": "lifecycle-ev-1"}
    assert slots.release("lifecycle-ev-1", "agent-a:1") == 0  # read afresh: not its name
    assert slots.release("lifecycle-ev-1") == 1 and held(store) == {}


class _Frozen:
    """``store`` whose ``query_prefix`` answers ``items`` (the slots as read before a write landed)."""

    def __init__(self, store: Store, items: list[dict[str, object]]) -> None:
        self._store, self._items = store, items

    def query_prefix(self, *args: object, **kwargs: object) -> list[dict[str, object]]:
        return self._items

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)
