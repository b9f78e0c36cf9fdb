"""The garbage collector's planning: dependents of an owner missing for OWNER_GRACE seconds are collected."""

from __future__ import annotations

import pytest

from localworld.simulator import gc
from localworld.simulator.base import Action, View
from localworld.simulator.gc import GarbageCollector

from .helpers import pod, shared, view


def world() -> View:
    rsets = {"ns/kept": {"metadata": {"name": "kept", "namespace": "ns", "uid": "kept-uid"}}}
    return view([], [pod("orphan", owner="gone-uid"), pod("owned", owner="kept-uid"), pod("bare")], rsets=rsets)


def test_a_missing_owner_gets_its_grace() -> None:
    actions: list[Action] = []
    GarbageCollector(shared()).plan(world(), actions)
    assert actions == []


def test_orphans_are_collected_once_the_grace_is_over(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gc, "OWNER_GRACE", 0.0)
    actions: list[Action] = []
    GarbageCollector(shared()).plan(world(), actions)
    assert [what for what, _ in actions] == ["collect pod ns/orphan"]
