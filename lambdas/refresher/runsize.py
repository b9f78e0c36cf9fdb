"""Whether a new run's ``RUN#`` item can be written for the whole run: at its creation and at its largest.

A run is refused at its start, before the lock, when its item would be over the size guard
(``core.runlimits.RUN_ITEM_GUARD_BYTES``, ``RunStore.item_of``) as planned or at the peak it reaches while it runs
(``core.runpeak.peak_run``: every step finished, those in flight at once at ``max_surge`` with their surge
baselines). Otherwise it would start, replace part of the cluster, and pause at the guard halfway
(``lambdas/common/refused.py``).
"""

from __future__ import annotations

from adapters.dynamo.runs import RunStore
from core.exceptions import RunRecordRefusedError
from core.runpeak import peak_run
from core.runs import Run

ADVICE = "refresh fewer instance groups at once (or a smaller max surge)"


def too_large(runs: RunStore, run: Run) -> str | None:
    """Why ``run``'s item cannot be written now or would outgrow the guard while it runs, or None when it fits.

    Args:
        runs: the store whose guard applies (``RunStore.guard_bytes``).
        run: the new run as planned (status ``running``, its steps pending).

    Returns:
        A one-line reason naming the item's size, the guard and when it would be reached, or None.
    """
    try:
        runs.item_of(run)
    except RunRecordRefusedError as err:
        return f"{err}: {ADVICE}"
    try:
        runs.item_of(peak_run(run))
    except RunRecordRefusedError as err:
        return (
            f"run {run.run_id}: its RUN# item would grow to {err.size} bytes while it runs ({len(run.steps)} steps "
            f"finished, up to {run.options.max_surge} in flight), over the {err.limit} bytes a save is attempted "
            f"with (DynamoDB refuses items over 400 KB): {ADVICE}"
        )
    return None
