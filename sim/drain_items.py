"""Invariant 3's reading of a drain command's ``CMD#`` item (``sim.invariants.Checker._terminate``): whether the drain
had its chance, so that terminating its instance is no "termination before drain" (docs/DESIGN.md invariant 3: "or
the drain's deadline passed, by policy")."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from core.model import DEADLINE_PASSED_BEFORE_START, INSTANCE_ID_RE
from sim.kernel import EPOCH
from sim.world_view import WorldView

# the replenisher's own drains (a give-back's, a surplus master's): nothing ends their instance but the terminate that
# follows, so no deadline of theirs excuses it unless the agent ran the drain (the product's reading is
# ``core.model.drain_never_ran``; a review found a give-back drain never sent, ended unstarted, excused:
# docs/SIMULATION.md)
DISCRETIONARY = ("CMD#giveback-", "CMD#surplus-")
# so is the refresher's drain of a spare it gives back (``refresh-<run>-<index>-undo[-<n>]``,
# ``lambdas.refresher.decide.undo.undo_draining``, ``core.model.drain_never_ran``)
UNDO_DRAIN = re.compile(r"CMD#refresh-.+-undo(-[0-9]+)?")


def drain_had_its_chance(item: dict[str, Any], t: float) -> bool:
    """Whether the drain ``item`` describes allows its instance's termination at simulated second ``t``: finished
    (succeeded, failed, timed out, skipped), or past its deadline (tightened or not); for the replenisher's own drains
    (``DISCRETIONARY``) and the refresher's undo drains (``UNDO_DRAIN``) only once the agent ran it: started before
    its deadline (``started_at``; one started at or after it times out at once, nothing evicted) and not ended before
    it ran (``core.model.DEADLINE_PASSED_BEFORE_START``: its deadline passed while it waited for a drain slot)."""
    sk = str(item.get("sk", ""))
    if sk.startswith(DISCRETIONARY) or UNDO_DRAIN.fullmatch(sk):
        started, command = item.get("started_at"), item.get("command")
        deadline = command.get("deadline") if isinstance(command, dict) else None
        if not started or (deadline is not None and _epoch(started) >= _epoch(deadline)) or _before_start(item):
            return False  # never run: whatever its status or deadline, no drain had its chance
    if item.get("status") not in ("queued", "running"):
        return True  # finished: the drain had its chance
    command = item.get("command")
    deadline = item.get("deadline_tightened_to") or (command.get("deadline") if isinstance(command, dict) else None)
    if deadline is None:
        return False
    return _epoch(deadline) <= EPOCH.timestamp() + t


def _before_start(item: dict[str, Any]) -> bool:
    """The agent ended the drain before it ran it (its deadline passed while it waited for a slot)."""
    result = item.get("result")
    return isinstance(result, dict) and str(result.get("message", "")).startswith(DEADLINE_PASSED_BEFORE_START)


def _epoch(when: Any) -> float:
    """An item's time (ISO 8601, or epoch seconds) in epoch seconds."""
    try:
        return datetime.fromisoformat(str(when)).timestamp()
    except ValueError:
        return float(when)


def unreachable_command(view: WorldView) -> str:
    """The end check that every recorded command is found through its pointers (``adapters.dynamo.command_index``):
    it carries ``indexed``, its instance's ``ICMD#`` pointer exists, and an open one (``queued``, ``running``) has its
    ``OCMD#`` pointer (only the sweep deletes those, and only for ended commands). A command without them would be
    unseen by a Spot warning's look-up and by the sweep until the next backfill. Answers the first one lacking some
    ("" when none does)."""
    for item in view.table_prefix("CMD#"):
        command_id = str(item.get("sk"))[len("CMD#") :]
        if not INSTANCE_ID_RE.fullmatch(str(item.get("instance_id"))):
            continue  # names no instance (forged): no reader asks for it, nor does the backfill point to it
        missing = []
        if item.get("indexed") is not True:
            missing.append("indexed")
        if view.table_item(f"ICMD#{item.get('instance_id')}#{command_id}") is None:
            missing.append("ICMD#")
        if item.get("status") in ("queued", "running") and view.table_item(f"OCMD#{command_id}") is None:
            missing.append("OCMD#")
        if missing:
            return f"command {command_id} lacks {missing}"
    return ""
