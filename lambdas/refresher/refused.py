"""A refused ``RUN#`` save: the run pauses with the reason instead of staying ``running`` for good.

A save is refused for its size before the call (``RunRecordRefusedError`` ``ItemTooLarge``: the item would be over
``core.runs.RUN_ITEM_GUARD_BYTES``) or by DynamoDB (``ValidationException``, e.g. over its 400 KB item size). Nothing
of the decision was applied (the save comes first). Retrying the same save would be refused the same way at every
pass, the run never moving on while it keeps its groups from compensation (issue 10). So the refusal is logged
(error) and counted (``RunRecordRefused``, by ``code``) and a small write records it on the stored item
(``RunStore.record_refusal``): a ``running`` run becomes ``pausing`` with the reason, and its next passes take the
normal pause path (pending steps skipped, steps in flight give their surge back, MaxSize restored, the run ends
``paused`` and the lock is released), each saved shed if the whole item does not fit. A run already stopping only
gets the reason appended: nothing more can be done for it by this invocation.
"""

from __future__ import annotations

from core.exceptions import RunConflictError, RunRecordRefusedError
from core.runs import Run, RunStatus
from lambdas.refresher.deps import RefresherDeps, logger


def record_refused(deps: RefresherDeps, run: Run, err: RunRecordRefusedError) -> bool:
    """Log, count and record a refused save of ``run`` (as read before the pass).

    Returns:
        True when the caller should read the run again and go on (it is pausing now, or another invocation saved
        first); False when it should stop (the run was already stopping: its own saves are refused).

    Raises:
        StoreUnavailableError: the small write failed (the next invocation tries again).
    """
    size = f" ({err.size} bytes)" if err.size is not None else ""
    logger.error(
        f"run {run.run_id}: save refused{size}: {err}",
        extra={"run_id": run.run_id, "code": err.code, "size": err.size, "limit": err.limit, "steps": len(run.steps)},
    )
    deps.effects().telemetry.count_by("RunRecordRefused", "code", err.code)
    reason = f"run record refused ({err.code}{size}): pausing; refresh fewer instance groups at once"
    try:
        deps.runs.record_refusal(run, reason, deps.clock())
    except RunConflictError:
        return True  # another invocation saved the run first: decide again on what it saved
    return run.status is RunStatus.RUNNING
