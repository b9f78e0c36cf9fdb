"""Seed 358113 of the ``resize`` profile (30 nodes x 2 days, one master; found after the nineteenth session's final
CI), kept as a regression case of a product bug: "4 sizes end where they were" (docs/SIMULATION.md, "Findings").

The replenisher raised ``nodes-us-east-1b`` for two failed groups (desired and MaxSize 10 -> 12, ``max_before`` 10).
kOps resized 1b up by 2 (32.41 h: MinSize 11, MaxSize 14, above every raise of ours); ``reconcile_donors`` read the
reset and rebased the ledgers' ``max_before`` to ``min(10, 14)``. A later raise took 1b to MaxSize 15, which hid
kOps' 14 from ``Builder.original_max``, and the give-back left 1b at MaxSize 11 (its desired capacity), three below
kOps' 14. A MaxSize above every raise of ours (those in flight too) is now the donor's own in every ledger's record.
"""

from __future__ import annotations

import pytest

from lambdas.replenisher.decide import reality
from sim.run import run_seed
from sim.schedules import RESIZE


def test_a_max_size_kops_raised_over_a_compensation_is_restored_to() -> None:
    result = run_seed(358113, 30, 2.0, masters=1, profile=RESIZE)
    assert result.violation is None, result.summary()


def test_without_the_rule_the_seed_breaks_invariant_4(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reality, "_own_max", lambda b, donor: None)
    result = run_seed(358113, 30, 2.0, masters=1, profile=RESIZE)
    assert result.violation is not None
    assert result.violation.invariant == "4 sizes end where they were"
    assert "nodes-us-east-1b ends at desired 11 MaxSize 11, was 11/14" in result.violation.detail
