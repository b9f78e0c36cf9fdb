"""Refresh runs in the table: the ``RUN#<run id>`` items (``core.runs.Run``), saved whole and conditioned on their
``version``, and what other capacity operations read of the active run (its surge).
"""

from __future__ import annotations

from adapters.dynamo.table import Attr, Table, Taking
from core.exceptions import RunConflictError
from core.lock import Lease
from core.runs import Run, RunStatus

PREFIX = "RUN#"


class RunStore:
    """``RUN#`` items of one cluster.

    Args:
        table: the cluster's table partition.
    """

    def __init__(self, table: Table) -> None:
        self.table = table

    @staticmethod
    def sk(run_id: str) -> str:
        return f"{PREFIX}{run_id}"

    def create(self, run: Run, fence: Lease | None = None) -> None:
        """Write a new run (version 0); with ``fence`` (the lease the run was started under) only while that lease
        is the lock's current one.

        Raises:
            LockLostError: (with ``fence``) the lock changed hands; nothing was written.
            RunConflictError: a run with this id exists.
        """
        self.table.put(
            self.sk(run.run_id),
            run.to_item(),
            condition=Attr("pk").not_exists(),
            conflict=RunConflictError,
            fence=fence,
        )

    def get(self, run_id: str) -> Run | None:
        """The run ``run_id`` (consistent read), or None."""
        item = self.table.get(self.sk(run_id))
        return None if item is None else Run.model_validate(item)

    def save(
        self, run: Run, fence: Lease | None = None, release_at: float | None = None, take: Taking | None = None
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

        Raises:
            LockLostError: (with ``fence``) the lock changed hands or was released; nothing was written.
            RunConflictError: another invocation saved first (``current`` holds its item).
        """
        saved = run.model_copy(update={"version": run.version + 1})
        self.table.put(
            self.sk(run.run_id),
            saved.to_item(),
            condition=Attr("version").eq(run.version),
            conflict=RunConflictError,
            fence=fence,
            release_at=release_at,
            take=take,
        )
        return saved

    def list(self, limit: int = 10) -> list[Run]:
        """The most recent runs, newest first (run ids sort by start time)."""
        runs = [Run.model_validate(item) for item in self.table.query_prefix(PREFIX, consistent=True)]
        return sorted(runs, key=lambda r: r.run_id, reverse=True)[:limit]

    def active(self) -> Run | None:
        """The active run (running, pausing or cancelling), or None. At most one exists: runs start under the
        cluster lock."""
        for item in self.table.query_prefix(PREFIX, consistent=True):
            if RunStatus(item.get("status", "failed")).active:
                return Run.model_validate(item)
        return None


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
