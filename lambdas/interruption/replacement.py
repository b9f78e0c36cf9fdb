"""Starting or joining a replacement run (``REBALANCE_POLICY=replace``, rule 5c of ``decide``): the effects of
``StartReplacement`` and ``JoinReplacement``, under the cluster lock.

The interruption Lambda takes the cluster lock as ``interruption:<run id>`` (operation ``replace``) for the two or
three table calls it needs, never across an AWS call, and gives it back at once. Under the lock the check "no run is
active" is authoritative (runs start only under the lock), and every write is fenced by the lease (a holder whose
lease was taken over writes nothing). What the run does next is the refresher's: it advances the run on its tick or
on the first event that concerns it (``lambdas.refresher``).

A save of the run refused for its size or as invalid (``RunRecordRefusedError``; nothing written, the lock given
back) would be refused again at every delivery of the event: ``replacement_refused`` logs and counts it
(``lambdas.common.refused``) and, for a join, records it on the stored run (``pausing`` with the reason); the
executor answers it as a refused replacement (``run_record_refused``), never a started one, and the rebalance cordon
stays.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from adapters.dynamo.lock import LeaseLock
from adapters.dynamo.runs import RunStore
from adapters.dynamo.store import Store
from core.exceptions import LockHeldError, LockLostError, RunConflictError, RunRecordRefusedError
from core.lock import LEASE_MARGIN_SECONDS
from core.runs import Run, RunStatus
from lambdas.common.refused import record_refused, refusal_reason
from lambdas.common.telemetry import Telemetry
from lambdas.interruption.plan import JoinReplacement, StartReplacement

FUNCTION_TIMEOUT_SECONDS = 30  # infra/interruption.py's TIMEOUT
LEASE_SECONDS = FUNCTION_TIMEOUT_SECONDS + LEASE_MARGIN_SECONDS  # core.lock.lease_too_short's rule
OPERATION = "replace"
JOIN_ATTEMPTS = 3
RECORD_REFUSED = "run_record_refused"  # the ``ReplacementsRefused`` reason of a refused save


def holder(run_id: str) -> str:
    """The lock holder name while the interruption Lambda starts or joins run ``run_id``."""
    return f"interruption:{run_id}"


def start_replacement(action: StartReplacement, store: Store, now: datetime) -> tuple[bool, str]:
    """Write the run's ``RUN#`` item under the cluster lock if no run is active.

    Returns:
        (started, what happened): not started when the lock is held by another operation, another run is active, the
        run exists already (a duplicate delivery), or the lock was lost before the write.

    Raises:
        StoreUnavailableError: the table is unavailable (the event is retried).
        RunRecordRefusedError: the run's item is too large or invalid; nothing was written (``replacement_refused``).
    """
    run = action.run
    lock = LeaseLock(store, clock=now.timestamp)
    try:
        lease = lock.acquire(holder(run.run_id), OPERATION, LEASE_SECONDS)
    except (LockHeldError, LockLostError) as err:
        return False, f"not started: the cluster lock is held by {(err.current or {}).get('holder')}"
    try:
        runs = RunStore(store)
        active = runs.active()
        if active is not None:
            if active.run_id == run.run_id:
                return False, "already started (an earlier delivery)"
            return False, f"not started: run {active.run_id} ({active.options.trigger}) is active"
        try:
            runs.create(run, fence=lease)
        except RunConflictError:
            return False, f"run {run.run_id} already recorded (an earlier delivery)"
        except LockLostError as err:
            return False, f"not started: lost the cluster lock ({err})"
        return True, f"started run {run.run_id}"
    finally:
        lock.release(lease)


def join_replacement(action: JoinReplacement, store: Store, now: datetime) -> tuple[bool, str]:
    """Append the step to the active replacement run under the cluster lock (the run read again there).

    Returns:
        (joined, what happened).

    Raises:
        StoreUnavailableError: the table is unavailable (the event is retried).
        RunRecordRefusedError: the run with the step would be too large (or is invalid); nothing was written
            (``replacement_refused``).
    """
    lock = LeaseLock(store, clock=now.timestamp)
    try:
        lease = lock.acquire(holder(action.run_id), OPERATION, LEASE_SECONDS)
    except (LockHeldError, LockLostError) as err:
        return False, f"not joined: the cluster lock is held by {(err.current or {}).get('holder')}"
    try:
        runs = RunStore(store)
        for _ in range(JOIN_ATTEMPTS):
            run = runs.get(action.run_id)
            refusal = _refuse_join(run, action)
            if refusal is not None or run is None:
                return False, refusal or "not joined"
            step = action.step.model_copy(update={"index": len(run.steps)})
            groups = list(run.groups)
            if action.group is not None and all(g.name != action.group.name for g in groups):
                groups.append(action.group)
            try:
                runs.save(
                    run.model_copy(update={"steps": [*run.steps, step], "groups": groups, "updated_at": now}),
                    fence=lease,
                )
            except RunConflictError:
                continue  # an operator's cancel request saved first: read it again
            except LockLostError as err:
                return False, f"not joined: lost the cluster lock ({err})"
            return True, f"joined run {run.run_id} as step {step.index}"
        return False, f"not joined: run {action.run_id} kept changing"
    finally:
        lock.release(lease)


def replacement_refused(
    action: StartReplacement | JoinReplacement,
    err: RunRecordRefusedError,
    store: Store,
    now: datetime,
    *,
    telemetry: Telemetry,
    logger: Any,
) -> str:
    """Answer a refused save of a replacement run (``lambdas.common.refused.record_refused``): logged (error) and
    counted (``RunRecordRefused`` by ``code``); a join's run (read again: the stored one, which the refused save was
    to extend) records the refusal and pauses with the reason, so the refresher gives its surge back. A start wrote
    nothing: there is no run to record it on.

    Returns:
        What happened, for the action's result (``refused: ...``).

    Raises:
        StoreUnavailableError: the table is unavailable (the event is retried; the next delivery is refused again
            and records it then).
    """
    runs = RunStore(store)
    run = runs.get(action.run_id) if isinstance(action, JoinReplacement) else None
    advice = "the run took no more replacements"
    recorded = record_refused(runs, run, err, now, telemetry=telemetry, logger=logger, advice=advice)
    if isinstance(action, StartReplacement):
        return f"refused: {refusal_reason(err, 'not started')}; the cordon stays"
    if recorded is None:
        state = "gone" if run is None else "changed meanwhile"
        return f"refused: {refusal_reason(err, 'not joined')}; run {action.run_id} {state}; the cordon stays"
    return (
        f"refused: {refusal_reason(err, 'not joined')}; run {action.run_id} {recorded.status.value}: {recorded.reason}"
    )


def _refuse_join(run: Run | None, action: JoinReplacement) -> str | None:
    if run is None or run.status is not RunStatus.RUNNING:
        return f"not joined: run {action.run_id} is {'gone' if run is None else run.status.value}"
    if any(s.instance_id == action.step.instance_id and not s.state.final for s in run.steps):
        return f"already in run {run.run_id}"
    unfinished = sum(1 for s in run.steps if not s.state.final)
    if unfinished >= action.limit:
        return f"not joined: run {run.run_id} replaces {unfinished} (limit {action.limit})"
    return None


def replaced_by_a_run(store: Store, instance_id: str) -> bool:
    """Whether the active run (``RunStore.active``) has an unfinished step for ``instance_id``: a replacement
    refused as made by an earlier delivery still replaces it.

    Raises:
        StoreUnavailableError: the table is unavailable (the event is retried).
    """
    run = RunStore(store).active()
    return run is not None and any(s.instance_id == instance_id and not s.state.final for s in run.steps)
