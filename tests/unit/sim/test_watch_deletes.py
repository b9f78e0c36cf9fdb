"""The watch's check of DELETEs past a PodDisruptionBudget (``sim.watch``, "A DELETE past a budget only as an ending
instance's deadline nears"): the agent's two rules put back wrong, one at a time, each found by a storm seed; the
product as it is holds on the same seeds."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import agent.drain.attempts
import agent.drain.engine
import sim.agent_drain
from core.settings import PdbDeadlinePolicy
from sim.run import run_seed
from tests.unit.sim.storm_profiles import STORM_BEFORE_FOREIGN

INVARIANT = "5 a pod is deleted past its budget only as its instance's deadline nears"


def every_drain_deletes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A refresh, rebalance or replenish drain deletes past budgets too (not only a Spot or lifecycle drain)."""

    def deletes(policy: PdbDeadlinePolicy, reason: str) -> bool:
        return policy == PdbDeadlinePolicy.DELETE

    monkeypatch.setattr(sim.agent_drain, "deletes_past_pdb", deletes)
    monkeypatch.setattr(agent.drain.engine, "deletes_past_pdb", deletes)


def deletes_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pod a budget protects is deleted right after the first refusal, not once its grace stops fitting."""
    monkeypatch.setattr(agent.drain.attempts, "seconds_until_pdb_delete", lambda wanted, remaining, margin: 0.0)


@pytest.mark.parametrize(
    ("mutant", "seed", "why"),
    [
        (every_drain_deletes, 0, "no deadline-bound drain of its instance started"),
        (deletes_at_once, 0, "stopped fitting before the drain's deadline"),
    ],
)
def test_a_delete_the_policy_does_not_allow_is_caught(
    monkeypatch: pytest.MonkeyPatch, mutant: Callable[[pytest.MonkeyPatch], None], seed: int, why: str
) -> None:
    mutant(monkeypatch)
    result = run_seed(seed, 30, 2, profile=STORM_BEFORE_FOREIGN)
    assert result.violation is not None, result.summary()
    assert result.violation.invariant == INVARIANT
    assert why in result.violation.detail


def test_the_agent_s_deletes_hold_on_those_seeds() -> None:
    result = run_seed(0, 30, 2, profile=STORM_BEFORE_FOREIGN)
    assert result.violation is None, result.summary()
    assert result.counters["stopped_by_delete"] > 0, "the seed deletes past a budget: the check was exercised"
