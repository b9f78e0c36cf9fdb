"""The informer cache: a newer resourceVersion wins, and a deletion is not undone by a late event."""

from __future__ import annotations

import threading

from localworld.simulator.informer import Informer

from .helpers import NO_API, pod


def rv(obj: dict, version: str) -> dict:
    return {**obj, "metadata": {**obj["metadata"], "resourceVersion": version}}


def test_newer_versions_win_and_tombstones_block_late_events() -> None:
    cache = Informer(NO_API, "pods", lambda: None, threading.Event())
    p = pod("p")
    cache.apply(rv(p, "5"))
    cache.apply(rv(p, "4"))
    assert cache.snapshot()["ns/p"]["metadata"]["resourceVersion"] == "5"
    assert cache.snapshot()["ns/p"]["kind"] == "Pod"
    cache.remove(rv(p, "6"))
    cache.apply(rv(p, "6"))
    assert cache.snapshot() == {}
    cache.apply(rv(p, "7"))
    assert "ns/p" in cache.snapshot()


def test_remove_of_another_uid_keeps_the_current_object() -> None:
    cache = Informer(NO_API, "pods", lambda: None, threading.Event())
    cache.apply(rv(pod("p"), "5"))
    other = rv(pod("p"), "6")
    other["metadata"]["uid"] = "someone-else"
    cache.remove(other)
    assert "ns/p" in cache.snapshot()
