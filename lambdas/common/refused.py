"""A refused ``RUN#`` save, wherever a Lambda writes runs: logged, counted, and recorded on the stored run when one
exists, instead of retried (a refusal is never counted as done, and bad input loses nothing).

A save is refused for its size before the call (``RunRecordRefusedError`` ``ItemTooLarge``: the item would be over
``core.runlimits.RUN_ITEM_GUARD_BYTES``) or by DynamoDB (``ValidationException``, e.g. over its 400 KB item size).
Nothing was written. Retrying the same save would be refused the same way at every attempt (a refresher pass, a
redelivered event), the run never moving on while it keeps its groups from compensation (issue 10). So the refusal is
logged (error) and counted (``RunRecordRefused``, by ``code``) and a small write records it on the stored item
(``RunStore.record_refusal``): a ``running`` run becomes ``pausing`` with the reason (``cancelling`` for an operator's
cancel, ``cancel=True``), and the refresher's next passes take the normal pause path (pending steps skipped, steps in
flight give their surge back, MaxSize restored, the run ends ``paused`` or ``cancelled`` and the lock is released), each
saved shed if the whole item does not fit. A run already stopping only gets the reason appended.

Used by the refresher (its passes, ``lambdas.refresher.advance``; an operator's cancel, ``service.cancel``) and by
the interruption Lambda (a replacement run it starts or joins, ``lambdas.interruption.replacement``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from adapters.dynamo.runs import RunStore
from core.exceptions import RunConflictError, RunRecordRefusedError
from core.runs import Run
from lambdas.common.telemetry import Telemetry

METRIC = "RunRecordRefused"


def refusal_reason(err: RunRecordRefusedError, what: str) -> str:
    """The reason a refused save records: ``run record refused (<code>[ (<size> bytes)]): <what>`` (pure)."""
    size = f" ({err.size} bytes)" if err.size is not None else ""
    return f"run record refused ({err.code}{size}): {what}"


def record_refused(
    runs: RunStore,
    run: Run | None,
    err: RunRecordRefusedError,
    now: datetime,
    *,
    telemetry: Telemetry,
    logger: Any,
    advice: str = "",
    cancel: bool = False,
) -> Run | None:
    """Log, count and record a refused save of ``run`` (as read before the save).

    Args:
        runs: the cluster's ``RUN#`` items.
        run: the stored run the refused save was to replace (at its stored ``version``); None when there is none
            (a new run's first write was refused): then the refusal is only logged and counted.
        err: the refusal.
        now: written as the run's ``updated_at``.
        telemetry: counts ``RunRecordRefused`` with dimension ``code``.
        logger: a Powertools ``Logger`` (or a ``logging.Logger``): one error line with ``run_id``, ``code``,
            ``size``, ``limit``.
        advice: appended to the recorded reason (what an operator can do about it).
        cancel: an operator's cancel was refused: the run is marked ``cancel_requested`` (``cancelling``) instead
            of ``pausing``, so the cancel is not lost.

    Returns:
        The run as now stored (version + 1, ``pausing``/``cancelling`` or its stopping status, with the reason);
        None when nothing was recorded (no run, or another invocation saved it first: read it again and decide on
        what it saved).

    Raises:
        StoreUnavailableError: the small write failed (the next invocation tries again).
    """
    steps = len(run.steps) if run is not None else None
    logger.error(
        f"run {err.run_id}: save refused: {err}",
        extra={"run_id": err.run_id, "code": err.code, "size": err.size, "limit": err.limit, "steps": steps},
    )
    telemetry.count_by(METRIC, "code", err.code)
    if run is None:
        return None
    what = "cancelling" if cancel else "pausing"
    reason = refusal_reason(err, f"{what}; {advice}" if advice else what)
    try:
        return runs.record_refusal(run, reason, now, cancel=cancel)
    except RunConflictError:
        return None
