"""Invariant 3's reading of a drain command's ``CMD#`` item (``sim.invariants.Checker._terminate``): whether the drain
had its chance, so that terminating its instance is no "termination before drain" (docs/DESIGN.md invariant 3: "or
the drain's deadline passed, by policy")."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from core.model import DEADLINE_PASSED_BEFORE_START
from sim.kernel import EPOCH

# the replenisher's own drains (a give-back's, a surplus master's): nothing ends their instance but the terminate that
# follows, so no deadline of theirs excuses it unless the agent started the drain (``lambdas.replenisher.decide.
# builder.never_ran``; a review found a give-back drain never sent, ended unstarted, excused: docs/SIMULATION.md)
DISCRETIONARY = ("CMD#giveback-", "CMD#surplus-")


def drain_had_its_chance(item: dict[str, Any], t: float) -> bool:
    """Whether the drain ``item`` describes allows its instance's termination at simulated second ``t``: finished
    (succeeded, failed, timed out, skipped), or past its deadline (tightened or not); for the replenisher's own drains
    (``DISCRETIONARY``) only once the agent started it (``started_at``) and ran it (not ended before it ran:
    ``core.model.DEADLINE_PASSED_BEFORE_START``)."""
    if str(item.get("sk", "")).startswith(DISCRETIONARY) and (not item.get("started_at") or _before_start(item)):
        return False  # never run: whatever its status or deadline, no drain had its chance
    if item.get("status") not in ("queued", "running"):
        return True  # finished: the drain had its chance
    command = item.get("command")
    deadline = item.get("deadline_tightened_to") or (command.get("deadline") if isinstance(command, dict) else None)
    if deadline is None:
        return False
    now = EPOCH.timestamp() + t
    try:
        return datetime.fromisoformat(str(deadline)).timestamp() <= now
    except ValueError:
        return float(deadline) <= now


def _before_start(item: dict[str, Any]) -> bool:
    """The agent ended the drain before it ran it (its deadline passed while it waited for a slot)."""
    result = item.get("result")
    return isinstance(result, dict) and str(result.get("message", "")).startswith(DEADLINE_PASSED_BEFORE_START)
