"""Refresh runs in the table: the ``RUN#<run id>`` items (``core.runs.Run``), saved whole and conditioned on their
``version``, and what other capacity operations read of the active run (its surge).

**Size.** DynamoDB refuses an item over 400 KB ("DynamoDB item sizes and formats"), and a run's whole state is one item,
its steps at rest as compact rows (``core.runrecord``). Before each write the item is measured as DynamoDB counts it
(``core.itemsize``); over ``guard_bytes`` (``core.runlimits.RUN_ITEM_GUARD_BYTES``) the write is not attempted:
``RunRecordRefusedError`` (code ``ItemTooLarge``). A run that is no longer ``running`` (pausing, cancelling, over) is
first saved shed (its final steps without their times, notes and node names, ``Run.to_item(shed=True)``), so the pause
that follows such a refusal can still be recorded, and its surge given back, step by step. A write DynamoDB refuses as
invalid (``ValidationException``; ``ValidationError`` in a transaction) raises the same error with its code.
``record_refusal`` is the small write that pauses the run then (``lambdas/common/refused.py``).

**Read back.** A store keeps the run its last save wrote (``RunStore.read``): a read whose item is that run at the
version the save wrote (every write of a ``RUN#`` item sets the version one higher, conditioned on the one before) is
answered with it, as validating the item would give it, without unpacking a row. The same calls and the same item
read; only the CPU of turning a thousand rows back into steps is not spent again (an execution environment's next
pass reads what its last one saved).

**Retention.** A run that is over (not ``running``, ``pausing`` nor ``cancelling``) is written with ``expires_at``
(``core.schema.TTL_ATTRIBUTE``, epoch seconds) ``retention_seconds`` after its end (``finished_at``, else its last
update): DynamoDB's TTL then deletes it, so finished runs do not pile up in the partition every tick reads. The
deletion is lazy ("typically within a few days": DynamoDB Developer Guide, "Working with expired items"; until then
an expired item still shows in reads and is billed), so ``list`` leaves out an item whose ``expires_at`` has passed.
"""

from __future__ import annotations

from collections.abc import Sequence
from copy import copy
from datetime import datetime
from decimal import Decimal
from itertools import compress
from operator import is_not
from typing import Any

from adapters.dynamo.table import AlsoPut, Attr, Table, Taking
from core.exceptions import AwsRequestError, RunConflictError, RunRecordRefusedError
from core.itemsize import item_bytes
from core.lock import Lease
from core.model import utcnow
from core.rowcache import RowCache
from core.runlimits import REFUSAL_REASON_CHARS, RUN_ITEM_GUARD_BYTES, RUN_RETENTION_SECONDS
from core.runrecord import FINAL_DROPS
from core.runs import Run, RunStatus, RunStep
from core.schema import TTL_ATTRIBUTE

PREFIX = "RUN#"
OVER = [s.value for s in RunStatus if not s.active]  # the statuses of a run that is over
# the attributes of a RUN# item written as they are (``Table.put``): its rows hold only str, int, bool and None
# (``core.runrecord``), DynamoDB values already, a 1,000-step run's 1,000 lists not copied again on every save; and
# read as they are answered (``values.plain_item``: ``core.rowread.unpack`` reads their numbers with ``int()``), by
# every reader of a ``RUN#`` item alike: a row's memo key holds ``Decimal``\ s then, and comparing one with an int
# (a reader that converted its rows first) cost more than the conversion saved
AS_IS = ("rows",)
# DynamoDB's codes for a write that is invalid as sent (an item over 400 KB among them): no retry helps
VALIDATION_CODES = frozenset({"ValidationException", "ValidationError"})


class RunStore:
    """``RUN#`` items of one cluster.

    Args:
        table: the cluster's table partition.
        guard_bytes: the largest item a write is attempted with (module docstring).
        retention_seconds: how long after its end a run that is over is kept (``RUN_RETENTION_SECONDS``; module
            docstring, "Retention").
    """

    def __init__(
        self, table: Table, guard_bytes: int = RUN_ITEM_GUARD_BYTES, retention_seconds: int = RUN_RETENTION_SECONDS
    ) -> None:
        self.table = table
        self.guard_bytes = guard_bytes
        self.retention_seconds = retention_seconds
        # the rows of the last item this store packed (one run's): a save packs and sizes only the steps that
        # changed since (``core.rowcache``)
        self.rows = RowCache()
        # the run as this store's last save wrote it, as a read of that item gives it back (``read``), and the
        # positions of its steps in flight (each read gets its own copies of those)
        self._kept: tuple[Run, list[int]] | None = None

    @staticmethod
    def sk(run_id: str) -> str:
        return f"{PREFIX}{run_id}"

    def item_of(self, run: Run) -> dict[str, Any]:
        """The item ``run`` is written as (attributes, no keys), shed when that is what makes a stopping run fit.

        Raises:
            RunRecordRefusedError: (``ItemTooLarge``) over ``guard_bytes`` even so.
        """
        item = self._expiring(run, run.to_item(cache=self.rows))
        size = self.size(run.run_id, item)
        if size > self.guard_bytes and run.status is not RunStatus.RUNNING and not run.history_shed:
            item = self._expiring(run, run.to_item(shed=True))
            size = self.size(run.run_id, item)
        if size > self.guard_bytes:
            raise RunRecordRefusedError(
                run.run_id,
                "ItemTooLarge",
                f"its RUN# item would be {size} bytes with {len(run.steps)} steps, over the {self.guard_bytes} "
                "bytes a save is attempted with (DynamoDB refuses items over 400 KB)",
                size,
                self.guard_bytes,
            )
        return item

    def _expiring(self, run: Run, item: dict[str, Any]) -> dict[str, Any]:
        """``item`` with its ``expires_at`` when ``run`` is over (module docstring, "Retention"); an active run's
        item has none."""
        if not run.status.active:
            ended = run.finished_at or run.updated_at
            item[TTL_ATTRIBUTE] = int(ended.timestamp()) + self.retention_seconds
        return item

    def size(self, run_id: str, item: dict[str, Any]) -> int:
        """The item's size with its keys, as DynamoDB counts it (``core.itemsize``; a map's None values, which
        ``Table.put`` leaves out, counted too: a few bytes over, never under). Its ``rows`` counted from this
        store's cache when they are the rows it last packed (``core.rowcache``: the same count, row by row)."""
        rows = item.get("rows")
        known = self.rows.rows_bytes(rows)
        if known is None:
            return item_bytes({**item, **self.table.key(self.sk(run_id))})
        head = {k: v for k, v in item.items() if k != "rows"}
        return item_bytes({**head, **self.table.key(self.sk(run_id))}) + len("rows") + known

    def _put(
        self,
        run: Run,
        item: dict[str, Any],
        condition: Any,
        fence: Lease | None,
        release_at: float | None = None,
        take: Taking | None = None,
        also: Sequence[AlsoPut] = (),
    ) -> None:
        try:
            self.table.put(
                self.sk(run.run_id),
                item,
                condition=condition,
                conflict=RunConflictError,
                fence=fence,
                release_at=release_at,
                take=take,
                also=also,
                as_is=AS_IS,
            )
        except AwsRequestError as err:
            if err.code not in VALIDATION_CODES:
                raise
            raise RunRecordRefusedError(run.run_id, err.code, str(err), self.size(run.run_id, item)) from err

    def create(self, run: Run, fence: Lease | None = None, take: Taking | None = None) -> None:
        """Write a new run (version 0); with ``fence`` (the lease the run was started under) only while that lease
        is the lock's current one; with ``take`` instead (``LeaseLock.taking``), taking the lock in the same
        transaction, fenced by the lease it takes.

        Raises:
            LockLostError: (with ``fence``) the lock changed hands; nothing was written.
            LockHeldError: (with ``take``) the lock changed hands since it was read; nothing was written.
            RunConflictError: a run with this id exists.
            RunRecordRefusedError: the item is too large (or otherwise invalid); nothing was written.
        """
        self._put(run, self.item_of(run), Attr("pk").not_exists(), fence, take=take)

    def get(self, run_id: str) -> Run | None:
        """The run ``run_id`` (consistent read), or None."""
        item = self.table.get(self.sk(run_id), as_is=AS_IS)
        return None if item is None else Run.model_validate(item)

    def save(
        self,
        run: Run,
        fence: Lease | None = None,
        release_at: float | None = None,
        take: Taking | None = None,
        also: Sequence[AlsoPut] = (),
    ) -> Run:
        """Write ``run`` if the stored version is still ``run.version``; returns it with version + 1.

        Args:
            fence: the cluster lock's lease the run advances under: the save applies only while it is the lock's
                current lease (a fenced ``TransactWriteItems``, ``Table.put``); None: not fenced (an operator's
                cancel request, which no AWS effect follows).
            release_at: (with ``fence``) give that lease up in the same transaction, at this time (epoch seconds):
                a save no effect follows that ends the holder's pass (``Table.put``).
            take: instead of ``fence``, take the lock in the same transaction (``LeaseLock.taking``): the save is
                fenced by the lease it takes (``LockHeldError`` when the lock changed hands since it was read).
            also: (with ``fence`` or ``take``) items written in the same transaction (``Table.put``): the ``CMD#``
                items of the drains the saved decision sends (``commands.recording``).

        Raises:
            LockLostError: (with ``fence``) the lock changed hands or was released; nothing was written.
            RunConflictError: another invocation saved first (``current`` holds its item), whatever ``also`` found.
            ConflictError: (an ``AlsoPut``'s ``conflict``, e.g. ``CommandExistsError``) only the condition of an item
                of ``also`` failed; nothing was written (save again without it).
            RunRecordRefusedError: the item is too large (or otherwise invalid); nothing was written.
        """
        saved = run.model_copy(update={"version": run.version + 1})
        item = self.item_of(saved)
        self._put(saved, item, Attr("version").eq(run.version), fence, release_at, take, also)
        self._keep(saved, shed=bool(item.get("history_shed")))
        return saved

    def read(self, item: dict[str, Any]) -> Run:
        """The run of a ``RUN#`` item read (as the table answered it, ``AS_IS``): ``Run.model_validate(item)``, or,
        when the item is the run this store last saved at the version that save wrote (its ``run_id`` and
        ``version`` as answered), that run as the save kept it, without unpacking a row (``_keep``).

        The version names the item's content: every write of a ``RUN#`` item sets it one higher, conditioned on the
        one before (``save``, ``record_refusal``; ``create`` writes 0), so the item at the version a save of this
        store wrote is the item it wrote. What is handed out is what validating it gives: the steps at rest
        (``RunStep.at_rest``) shared between reads as ``core.rowread.unpack`` shares them, each step in flight and
        each group a copy of this read's own (``core.runs._read_copy``)."""
        kept = self._kept
        if kept is not None:
            run, moving = kept
            version = item.get("version")
            if (
                item.get("run_id") == run.run_id
                and type(version) in (int, Decimal)
                and version == run.version
                and type(item.get("run_id")) is str
            ):
                return _handed(run, moving)
        return Run.model_validate(item)

    def _keep(self, saved: Run, shed: bool) -> None:
        """Keep ``saved`` (just written) as a read of its item would give it (``read``): its final steps without what
        the item drops (``RunStep.at_rest``), each step worked out only where it is not the step kept at its position
        before (a step at rest is never changed in place). Not a shed item (its final steps lost more: read then)."""
        if shed or saved.history_shed:
            self._kept = None
            return
        last = self._kept if self._kept is not None and self._kept[0].run_id == saved.run_id else None
        before = last[0].steps if last is not None else []
        steps = list(saved.steps)
        changed = [*compress(range(len(before)), map(is_not, steps, before)), *range(len(before), len(steps))]
        # a step kept in flight is never handed out (each read copies it), so none is the saved run's own: checked
        moving = [p for p in last[1] if p < len(steps) and steps[p] is before[p]] if last is not None else []
        for position in changed:
            step = steps[position]
            if step.state.in_flight:
                steps[position] = step.working_copy()  # its own: the saved run's may be decided on again in-process
                moving.append(position)
            elif step.state.final and not _dropped(step):  # ``RunStep.at_rest``, its defaults not looked up again
                steps[position] = step.model_copy(update={f: copy(v) for f, v in _DROPPED.items()})
        kept = saved.model_copy()
        kept.__dict__["steps"] = steps
        kept.__dict__["groups"] = [g.model_copy() for g in saved.groups]
        self._kept = (kept, moving)

    def record_refusal(self, run: Run, reason: str, now: datetime, cancel: bool = False) -> Run:
        """The small write after a refused save (``RunRecordRefusedError``): the stored item (still at
        ``run.version``) gets ``reason`` and, when it is ``running``, status ``pausing`` (its undo is the next
        passes'); a run already stopping keeps its status and its reason gets this one appended. Conditioned on the
        version alone (an UpdateItem of a few attributes: it fits whatever the item's size, which was under the guard
        when it was last written); no AWS call follows it. With ``cancel`` (an operator's cancel whose save was
        refused) the run is also marked ``cancel_requested`` and a ``running`` one becomes ``cancelling``, so the
        cancel is not lost (``lambdas/common/refused.py``).

        Returns:
            The run as now stored (version + 1).

        Raises:
            RunConflictError: another invocation saved first.
        """
        stop = RunStatus.CANCELLING if cancel else RunStatus.PAUSING
        status = stop if run.status is RunStatus.RUNNING else run.status
        text = reason if run.status is RunStatus.RUNNING or not run.reason else f"{run.reason}; {reason}"
        text = text[:REFUSAL_REASON_CHARS]
        changes: dict[str, Any] = {"status": status, "reason": text, "waiting": "", "updated_at": now}
        if cancel:
            changes["cancel_requested"] = True
        self.table.update(
            self.sk(run.run_id),
            {
                **changes,
                "status": status.value,
                "updated_at": now.isoformat(),
                "version": run.version + 1,
            },
            condition=Attr("version").eq(run.version),
            conflict=RunConflictError,
        )
        return run.model_copy(update={**changes, "version": run.version + 1})

    def list(self, limit: int = 10, now: datetime | None = None) -> list[Run]:
        """The most recent runs, newest first (run ids sort by start time); a run whose ``expires_at`` is at or
        before ``now`` (default: the current time) is left out, whether or not DynamoDB has deleted it yet."""
        cutoff = (now or utcnow()).timestamp()
        runs = [
            Run.model_validate(item)
            for item in self.table.query_prefix(PREFIX, consistent=True, as_is=AS_IS)
            if not expired(item, cutoff)
        ]
        return sorted(runs, key=lambda r: r.run_id, reverse=True)[:limit]

    def active(self) -> Run | None:
        """The active run (running, pausing or cancelling), or None. At most one exists: runs start under the
        cluster lock."""
        # the runs that are over (kept until their TTL; a weekly run of 1,000 nodes is a 130 KB item) are dropped by
        # DynamoDB (a FilterExpression: still read, never sent nor parsed); any other status is judged here as before
        over = ~Attr("status").is_in(OVER)
        for item in self.table.query_range(PREFIX, PREFIX[:-1] + "$", consistent=True, keep=over, as_is=AS_IS):
            if RunStatus(item.get("status", "failed")).active:
                return Run.model_validate(item)
        return None


# what a final step's ``core.runrecord.FINAL_DROPS`` hold in its ``RUN#`` item (their defaults; pydantic's
# ``get_default`` inspects the factory's signature on every call: 0.2 ms a step)
_DROPPED = {f: RunStep.model_fields[f].get_default(call_default_factory=True) for f in FINAL_DROPS}


def _dropped(step: RunStep) -> bool:
    """Whether ``step`` holds nothing of what its item drops (``RunStep.at_rest`` would only copy it): a final step
    read from a row, or kept before."""
    fields = step.__dict__
    return all(type(fields[f]) is type(v) and fields[f] == v for f, v in _DROPPED.items())


def _handed(run: Run, moving: list[int]) -> Run:
    """What one read of the kept ``run`` gets (``RunStore.read``): its steps at rest shared, its steps in flight (at
    ``moving``) and its groups copied."""
    steps = list(run.steps)
    for position in moving:
        steps[position] = steps[position].working_copy()
    out = run.model_copy()
    out.__dict__["steps"] = steps
    out.__dict__["groups"] = [g.model_copy() for g in run.groups]
    return out


def expired(item: dict[str, Any], now: float) -> bool:
    """Whether ``item`` (plain values) carries an ``expires_at`` at or before ``now`` (epoch seconds): DynamoDB may
    delete it any time, and may not have yet. An unreadable ``expires_at`` does not expire it. Pure."""
    value = item.get(TTL_ATTRIBUTE)
    return isinstance(value, int | float) and not isinstance(value, bool) and value <= now


def surge_capacity(table: Table) -> dict[str, int]:
    """ASG name -> desired capacity the active refresh run added (empty without an active run).

    For other capacity operations (the replenisher): this capacity is the run's, never surplus.
    """
    run = RunStore(table).active()
    return run.surge if run else {}


def surge_instance_ids(table: Table) -> set[str]:
    """Instances launched as spares by the active refresh run (empty without one)."""
    run = RunStore(table).active()
    return set(run.surge_instance_ids) if run else set()
