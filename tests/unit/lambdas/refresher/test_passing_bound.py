"""A pass may give the cluster lock up in its ``RUN#`` save only when its drains are recorded in that save's
transaction (``passes.passing``, ``execute._save``: one bound, ``passes.recorded_with_save``). With more drains than
fit (each is three items: ``CMD#``, ``ICMD#``, ``OCMD#``), the lock is kept and their records are written under it;
before, a pass of 33 to 98 drains gave the lock up in the save and recorded its commands after it, unfenced."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from adapters.dynamo.lock import LeaseLock
from adapters.dynamo.runs import RunStore
from adapters.dynamo.store import Store
from adapters.dynamo.table import MAX_ALSO
from core.model import Command
from core.runs import LOCK_OPERATION, GroupSurge, Run, RunOptions, RunStep, StepState
from lambdas.refresher.decide.context import Decision
from lambdas.refresher.execute import Effects, execute
from lambdas.refresher.passes import ITEMS_PER_COMMAND, passing, recorded_with_save
from lambdas.refresher.plan import SaveRun, SendCommand
from tests.unit.lambdas.refresher.execute_world import RUN_ID, T0, Recorder, table_calls


def _decision(drains: int) -> tuple[Run, list[SaveRun | SendCommand], Decision]:
    run = Run(
        run_id=RUN_ID,
        cluster="demo",
        options=RunOptions(max_surge=drains),
        groups=[
            GroupSurge(name="nodes", role="node", min_size=1, original_desired=100, original_max=100, raised=drains)
        ],
        steps=[
            RunStep(
                index=i,
                group="nodes",
                role="node",
                instance_id=f"i-{i:017x}",
                state=StepState.DRAINING,
                command_id=f"refresh-{RUN_ID}-{i}",
            )
            for i in range(drains)
        ],
        created_at=T0,
        updated_at=T0,
    )
    commands = [
        Command(
            command_id=f"refresh-{RUN_ID}-{i}",
            cluster="demo",
            kind="drain",
            instance_id=f"i-{i:017x}",
            reason=f"refresh {RUN_ID} step {i}",
            deadline=T0 + timedelta(minutes=10),
        )
        for i in range(drains)
    ]
    actions: list[SaveRun | SendCommand] = [SaveRun(run), *(SendCommand(c) for c in commands)]
    return run, actions, Decision(run, list(actions))


def test_the_bound_is_what_a_transaction_holds_beside_the_run_and_the_lock() -> None:
    most = MAX_ALSO // ITEMS_PER_COMMAND
    assert recorded_with_save(most) and not recorded_with_save(most + 1)
    assert passing(_decision(most)[2]) and not passing(_decision(most + 1)[2])


@pytest.mark.parametrize("drains", [2, 40])
def test_no_command_is_recorded_unfenced_whatever_the_number_of_drains(store: Store, drains: int) -> None:
    run, actions, decision = _decision(drains)
    RunStore(store).create(run)
    lock = LeaseLock(store, clock=lambda: T0.timestamp())
    holder = f"refresher:{RUN_ID}:inv-1"
    effects = Effects(
        store=store,
        runs=RunStore(store),
        lock=lock,
        aws=Recorder(),  # type: ignore[arg-type]  # a recording double of AwsPort
        telemetry=Recorder(),  # type: ignore[arg-type]  # and of Telemetry
        logger=logging.getLogger("test"),
        ttl_seconds=3600,
        take=lock.passing(holder, LOCK_OPERATION, lock.current()) if passing(decision) else None,
        lease=None if passing(decision) else lock.acquire(holder, LOCK_OPERATION, 120),
    )
    calls = table_calls(store)
    execute(list(actions), effects, T0)
    plain_puts = [keys[0] for op, keys in calls if op == "PutItem" and keys and keys[0].startswith("CMD#")]
    transacted = [k for op, keys in calls if op == "TransactWriteItems" for k in keys if k.startswith("CMD#")]
    assert len(transacted) + len(plain_puts) == drains
    if plain_puts:  # recorded after the save: only while the lock is still this pass's
        assert (lock.current() or {}).get("holder") == holder
