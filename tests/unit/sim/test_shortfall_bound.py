"""The checker's shortfall liveness (``sim.invariants.Checker._shortfalls``): a pool short while an AZ is out must
be covered within the bound by a healthy sibling with room under the donor cap; when every healthy sibling is at
its cap (seed 5024 of the ``refused_terminate_given_back`` profile: two AZs of three out, the third raised from 4
to 8), nothing can cover it and nothing is reported."""

from __future__ import annotations

from typing import Any

import pytest

from sim.invariants import Bounds, Checker, Violation
from sim.world_view import GroupState

BASE = {f"nodes-{az}": (4, 4) for az in "abc"}


class View:
    def baseline(self) -> dict[str, tuple[int, int]]:
        return dict(BASE)


def groups(b_desired: int) -> list[GroupState]:
    return [
        GroupState("nodes-a", False, "a", "nodes", 4, 4, 4),
        GroupState("nodes-b", False, "b", "nodes", b_desired, 4, b_desired),
        GroupState("nodes-c", False, "c", "nodes", 4, 4, 4),
    ]


def judge(b_desired: int, running: dict[str, int], factor: float = 2.0) -> None:
    view: Any = View()
    checker = Checker(view, 0, Bounds(shortfall=600.0, donor_max_size_factor=factor))
    for t in (0.0, 700.0):
        checker.t = t
        checker._shortfalls(groups(b_desired), running, frozenset({"a", "c"}))


def test_a_shortfall_a_healthy_sibling_could_still_cover_is_reported() -> None:
    with pytest.raises(Violation, match="every shortfall covered"):
        judge(7, {"nodes-a": 1, "nodes-b": 7, "nodes-c": 2})  # b at 7 of its cap 8


def test_a_shortfall_with_every_healthy_sibling_at_its_cap_is_not() -> None:
    judge(8, {"nodes-a": 1, "nodes-b": 8, "nodes-c": 1})  # b at its cap 2 x 4


def test_the_cap_is_the_replenisher_s_factor() -> None:
    with pytest.raises(Violation):
        judge(8, {"nodes-a": 1, "nodes-b": 8, "nodes-c": 1}, factor=2.5)  # cap 10: b has room
