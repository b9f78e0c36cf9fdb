"""The capacity bounds are made only for a plan that resizes a group (``handler.process``): a steady tick's plan has
no ``SetCapacity``, and the executor reads the bounds for nothing else."""

from __future__ import annotations

from typing import Any

import pytest

from core.model import utcnow
from lambdas.replenisher import handler
from lambdas.replenisher.decide.builder import Plan
from lambdas.replenisher.handler import Deps, handle
from lambdas.replenisher.plan import Note, Reason, SetCapacity
from localworld.eventbus import scheduled_event


@pytest.mark.parametrize("resize", [False, True])
def test_the_bounds_are_made_for_a_resize_only(deps: Deps, monkeypatch: pytest.MonkeyPatch, resize: bool) -> None:
    made: list[Any] = []
    real = handler.capacity_bounds

    def counted(*args: Any) -> Any:
        made.append(args)
        return real(*args)

    monkeypatch.setattr(handler, "capacity_bounds", counted)
    name = next(iter(handler.gather(deps, utcnow()).groups))
    actions: tuple[Any, ...] = (Note(Reason.NOTHING_TO_DO, "steady"),)
    if resize:
        actions += (SetCapacity(name, desired=1, why="test"),)
    monkeypatch.setattr(handler, "decide", lambda *args, **kwargs: Plan(actions))
    now = utcnow()

    handle(scheduled_event("replenisher-tick", time=now), deps, now=now)

    assert len(made) == (1 if resize else 0)
