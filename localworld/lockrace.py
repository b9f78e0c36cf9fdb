"""A harness that races contenders for the cluster lock on the local world's moto server and counts double grants.

Each trial uses a fresh partition (cluster ``race-<n>``) of one table; ``contenders`` threads, each with its own
boto3 client (as separate Lambda invocations have), wait on a barrier and then all call ``acquire`` at once. Every
other trial starts from an expired lease left by a crashed holder (the take-over path, conditioned on the fencing
value), the others from no ``LOCK`` item at all (the first-acquisition path). A trial with more than one winner is a
double grant: two holders both believing they hold the lock.

``lease_acquire`` is the real ``adapters.dynamo.lock.LeaseLock.acquire``; ``racy_acquire(delay)`` is a test-only
variant whose check (a read) and write (unconditional) are separated by ``delay`` seconds, so the harness can be
seen to catch a lock that is not atomic.

Two test-only switches show that it is the local world's serialised DynamoDB (``localworld.aws.serialise_dynamodb``)
that makes the real lock atomic there: ``condition_gap(delay)`` makes moto wait ``delay`` seconds between evaluating a
write's condition and applying the write, and ``unserialised_dynamodb()`` takes the serialisation away for a while.
With the gap and the serialisation, the real lock still has no double grant; with the gap and without it, it has.

Used by ``tests/integration/adapters/test_lock_race.py`` (a few hundred trials) and ``bench/lock_race.py`` (1,000).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import moto.dynamodb.models.table as moto_table
from moto.dynamodb.responses import DynamoHandler

from adapters.dynamo.lock import LOCK_SK, LeaseLock
from adapters.dynamo.table import Table
from core.exceptions import LockHeldError
from core.lock import Lease, fencing_of, renewable_by
from core.schema import state_table
from localworld.aws import WorldSession

# acquire(table partition, holder) -> the lease won; raises LockHeldError when another holds the lock
Acquire = Callable[[Table, str], Lease]

LEASE_SECONDS = 30.0
CRASHED_FENCING = 7  # the fencing value of the expired lease a take-over trial starts from


def lease_acquire(table: Table, holder: str) -> Lease:
    """The lock as the Lambdas take it (read, then a write conditioned on what was read)."""
    return LeaseLock(table).acquire(holder, "race", LEASE_SECONDS)


def racy_acquire(delay: float) -> Acquire:
    """A deliberately broken lock: it reads the ``LOCK`` item, decides in Python that the lock is free, waits
    ``delay`` seconds, then writes without a condition. Test-only: it shows the harness can fail."""

    def acquire(table: Table, holder: str) -> Lease:
        now = time.time()
        current = table.get(LOCK_SK)
        if current is not None and current.get("holder") and renewable_by(current, str(current["holder"]), now):
            raise LockHeldError(f"lock held by {current.get('holder')}", current)
        time.sleep(delay)
        fencing = fencing_of(current) + 1
        expires = now + LEASE_SECONDS
        table.put(LOCK_SK, {"holder": holder, "operation": "race", "lease_expires_at": expires, "fencing": fencing})
        return Lease(holder, "race", fencing, expires)

    return acquire


@contextlib.contextmanager
def condition_gap(delay: float) -> Iterator[None]:
    """Within the block, moto's DynamoDB tables wait ``delay`` seconds after evaluating a write's condition
    expression, before applying the write (moto's ``Table`` resolves ``get_filter_expression`` from its module on
    every put/update/delete). Test-only."""
    original = moto_table.get_filter_expression

    class Delayed:
        def __init__(self, op: Any) -> None:
            self.op = op

        def expr(self, item: Any) -> Any:
            result = self.op.expr(item)
            time.sleep(delay)
            return result

    def delayed(*args: Any, **kwargs: Any) -> Any:
        return Delayed(original(*args, **kwargs))

    moto_table.get_filter_expression = delayed
    try:
        yield
    finally:
        moto_table.get_filter_expression = original


@contextlib.contextmanager
def unserialised_dynamodb() -> Iterator[None]:
    """Within the block, moto's DynamoDB serves requests in parallel again, as moto does by itself. Test-only."""
    installed = DynamoHandler.call_action
    original = getattr(installed, "__wrapped__", None)
    if original is None:  # not serialised: nothing to take away
        yield
        return
    DynamoHandler.call_action = original  # type: ignore[method-assign]
    try:
        yield
    finally:
        DynamoHandler.call_action = installed  # type: ignore[method-assign]


@dataclass
class RaceReport:
    """What a race found.

    Attributes:
        trials: trials run; contenders: contenders per trial.
        double_grants: trials in which more than one contender won.
        winners: number of winners -> trials (a sound lock: ``{1: trials}``).
        errors: outcomes other than winning or ``LockHeldError`` (first 10, as text); ``error_count``: all of them.
        seconds: wall time of the trials (table creation excluded).
    """

    trials: int
    contenders: int
    double_grants: int = 0
    winners: Counter[int] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    error_count: int = 0
    seconds: float = 0.0

    def summary(self) -> str:
        return (
            f"{self.trials} trials x {self.contenders} contenders: {self.double_grants} double grants, "
            f"winners per trial {dict(sorted(self.winners.items()))}, {self.error_count} errors, "
            f"{self.seconds:.1f} s ({1000 * self.seconds / max(self.trials, 1):.0f} ms a trial)"
        )


def race(
    session: WorldSession,
    trials: int,
    contenders: int = 10,
    acquire: Acquire = lease_acquire,
    table_name: str | None = None,
) -> RaceReport:
    """Run ``trials`` races of ``contenders`` threads for the lock in a new table on ``session``'s endpoint.

    Args:
        session: the local world's AWS session (moto server).
        acquire: the lock under test (``lease_acquire`` or ``racy_acquire(delay)``).
        table_name: the table to create (default a unique name); it is deleted afterwards.

    Returns:
        The report; ``double_grants`` is what a test asserts on.
    """
    name = table_name or f"lock-race-{time.time_ns()}"
    ddb = session.resource("dynamodb")
    ddb.create_table(**state_table(name))
    try:
        return _race(session, name, trials, contenders, acquire)
    finally:
        ddb.Table(name).delete()


def _race(session: WorldSession, name: str, trials: int, contenders: int, acquire: Acquire) -> RaceReport:
    report = RaceReport(trials=trials, contenders=contenders)
    setup = session.resource("dynamodb").Table(name)
    start = threading.Barrier(contenders + 1, timeout=120)
    done = threading.Barrier(contenders + 1, timeout=120)
    lock = threading.Lock()
    state: dict[str, Any] = {"trial": -1, "stop": False}
    outcomes: list[Lease | None] = []

    def contender(index: int) -> None:
        resource = session.resource("dynamodb").Table(name)  # one client per contender
        while True:
            start.wait()
            if state["stop"]:
                return
            table = Table(resource, f"race-{state['trial']}")
            outcome: Lease | None = None
            try:
                outcome = acquire(table, f"contender-{index}")
            except LockHeldError:
                pass
            except Exception as err:  # noqa: BLE001 - any other outcome is reported, not raised in a thread
                with lock:
                    report.error_count += 1
                    if len(report.errors) < 10:
                        report.errors.append(f"{type(err).__name__}: {err}")
            with lock:
                outcomes.append(outcome)
            done.wait()

    threads = [threading.Thread(target=contender, args=(i,), daemon=True) for i in range(contenders)]
    for thread in threads:
        thread.start()
    t0 = time.perf_counter()
    try:
        for trial in range(trials):
            state["trial"] = trial
            if trial % 2:
                Table(setup, f"race-{trial}").put(
                    LOCK_SK,
                    {
                        "holder": "crashed",
                        "operation": "race",
                        "lease_expires_at": time.time() - 1,
                        "fencing": CRASHED_FENCING,
                    },
                )
            outcomes.clear()
            start.wait()
            done.wait()
            won = sum(1 for o in outcomes if o is not None)
            report.winners[won] += 1
            if won > 1:
                report.double_grants += 1
    finally:
        report.seconds = time.perf_counter() - t0
        state["stop"] = True
        start.wait(timeout=30)
        for thread in threads:
            thread.join(timeout=30)
    return report
