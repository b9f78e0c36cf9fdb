"""Forged command messages (``sim.actors._forged``, the storm profile): a body no ``CMD#`` item backs, or one that
redirects a real command to another worker, runs nothing. The agent binds every body to its record
(``agent.consumer.decisions.bind_to_record``; docs/DESIGN.md invariant 9); put back wrong (the body trusted as it
is), a storm seed finds it."""

from __future__ import annotations

from collections import Counter

import pytest

import agent.consumer.worker
from agent.consumer.decisions import Binding
from core.model import Command
from sim.run import run_seed
from sim.world import World
from tests.unit.sim.storm_profiles import STORM_BEFORE_FOREIGN


def test_forged_messages_run_nothing_and_end_in_the_dead_letter_queue() -> None:
    worlds: list[World] = []
    result = run_seed(0, 30, 2, profile=STORM_BEFORE_FOREIGN, mutate=worlds.append)
    assert result.violation is None, result.summary()
    forged = Counter(str(f.param("variant")) for f in result.schedule if f.kind == "forged_message")
    assert {"garbage", "no_record", "mismatch", "replay"} <= set(forged), forged
    dead = [m.body for m in worlds[0].aws.queue.dead_letters]
    assert any(body.startswith('{"command_id": "forged", "kind": ') for body in dead)  # garbage: dead-lettered
    assert any('"command_id": "forged-' in body for body in dead)  # no CMD# item for it


def test_an_agent_that_trusts_the_body_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    def trusted(claimed: Command, item: object) -> Binding:
        return Binding(claimed)

    monkeypatch.setattr(agent.consumer.worker, "bind_to_record", trusted)
    result = run_seed(0, 30, 2, profile=STORM_BEFORE_FOREIGN)
    assert result.violation is not None
    assert result.violation.invariant == "5 a drain stops at its deadline"
    assert "no drain of it started" in result.violation.detail
