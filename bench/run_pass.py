"""One refresher pass's CPU on a large run (``python -m bench.run_item --pass``): what a pass does with the ``RUN#``
item besides its AWS and membership reads, per phase, at 300 and 1,000 steps. No world, no AWS.

The run is ``bench.run_item``'s weekly refresh of 3 worker groups (``max_surge`` 1), its first two thirds ``done``
and the next step ``surging`` with its spare Ready: the pass drains that step's old node (a ``SaveRun`` and a
``SendCommand``), the most common pass of a run. Phases, each the best of 5 rounds of 20 (``time.process_time``):

- ``read``: the stored item as boto3 answers it (numbers as ``Decimal``) made plain but for its rows
  (``adapters.dynamo.values.plain_item`` with ``runs.AS_IS``, what every ``RUN#`` read does) and validated
  (``Run.model_validate``, rows unpacked with their numbers as answered: ``core.rowread``);
  the same item each time, as a run's next pass finds most of its rows; ``cold read``: each time with one more word
  in its ``words`` (unused), so no row was read before in that item (``core.rowread``'s memo, "Memos" in
  ``core.runrecord``): a run's first read in a process, or the first after its words grew;
- ``decide``: ``lambdas.refresher.decide.advance`` (its ``Run.working_copy`` included);
- ``save``: the saved run's item (``RunStore.item_of``: ``Run.to_item``, its size against the guard) and its
  DynamoDB values (``dynamo_item``, its rows as they are: what ``Table.put`` sends), by a store whose last item was
  the run as read and the run as saved in turn (a pass's save: only the steps the pass changed packed again,
  ``core.rowcache``);
  ``cold save``: the same by a new store each time (every row packed: a store's first save, or one after the run's
  words or groups changed).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from decimal import Decimal
from itertools import count, cycle
from typing import Any, TypeVar

from adapters.dynamo.runs import AS_IS, RunStore
from adapters.dynamo.table import Table, dynamo
from adapters.dynamo.values import dynamo_item, plain_item
from bench.run_item import GROUPS, KEYS, run
from core.kops import Role
from core.model import NodeRecord
from core.runs import Run, RunOptions, StepState
from core.settings import RefresherSettings
from lambdas.refresher.decide import advance
from lambdas.refresher.world import GroupFacts, InstanceFacts, World

SETTINGS = RefresherSettings(cluster_name="prod.k8s.example.com", table_name="t", queue_url="q")
T = TypeVar("T")


class _NoTable:
    """Where ``RunStore`` would write: only its name is read (``item_of`` writes nothing)."""

    name = "t"


def scenario(steps: int) -> tuple[Run, World]:
    """The run with two thirds ``done`` and step ``2n/3`` surging, its spare Ready, and the world it sees."""
    done = steps * 2 // 3
    base = run(steps, done)
    now = base.updated_at
    live: dict[str, list[str]] = {g: [] for g in GROUPS}
    for s in base.steps:
        live[s.group].append(s.instance_id if s.state is StepState.PENDING else str(s.surge_instance_id))
    k, since = done, now - timedelta(minutes=3)
    step = base.steps[k]
    spare = f"i-0{k + 10**6:016x}"
    base.steps[k] = step.model_copy(
        update={
            "state": StepState.SURGING,
            "started_at": since,
            "intent_at": since,
            "surge_baseline": sorted(live[step.group]),
            "waiting_since": {"spare_launch": since},
            "entered": {"surging": since},
        }
    )
    for g in base.groups:
        g.original_desired = g.min_size = len(live[g.name])
        g.original_max = g.original_desired + 1
        g.raised = int(g.name == step.group)
    live[step.group].append(spare)
    groups = {
        g: GroupFacts(
            name=g,
            role=Role.NODE,
            instance_group=None,
            min_size=len(ids) - int(g == step.group),
            max_size=len(ids),
            desired=len(ids),
            instances=tuple(InstanceFacts(i) for i in ids),
        )
        for g, ids in live.items()
    }
    nodes = {
        i: NodeRecord(instance_id=i, node_name=i, ready=True, reported_at=now) for ids in live.values() for i in ids
    }
    return base.model_copy(update={"options": RunOptions(max_surge=1)}), World(groups=groups, nodes=nodes)


def as_answered(value: Any) -> Any:
    """``value`` as boto3's resource layer answers it: every number a ``Decimal``."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, dict):
        return {k: as_answered(v) for k, v in value.items()}
    return [as_answered(v) for v in value]


def best_ms(work: Callable[[], T], rounds: int = 5, repeat: int = 20) -> tuple[float, T]:
    """The best CPU milliseconds of one call of ``work`` over ``rounds`` rounds of ``repeat`` calls, and its result."""
    best = float("inf")
    out = work()
    for _ in range(rounds):
        started = time.process_time()
        for _ in range(repeat):
            out = work()
        best = min(best, (time.process_time() - started) / repeat)
    return best * 1000, out


def measure(steps: int) -> dict[str, float]:
    """CPU milliseconds of each phase of one pass over the ``steps``-step run (module docstring)."""
    current, world = scenario(steps)
    store = RunStore(Table(_NoTable(), "prod.k8s.example.com"))
    stored = as_answered(dynamo({**store.item_of(current), **KEYS}))
    read, got = best_ms(lambda: Run.model_validate(plain_item(stored, AS_IS)))
    assert got == current.at_rest(), "the run read back is not the run saved"
    fresh = count()
    cold, _ = best_ms(
        lambda: Run.model_validate(plain_item({**stored, "words": [*stored["words"], f"w{next(fresh)}"]}, AS_IS))
    )
    decide, decision = best_ms(lambda: advance(got, world, SETTINGS, got.updated_at + timedelta(seconds=5)))
    kinds = [type(a).__name__ for a in decision.actions]
    assert kinds == ["SaveRun", "SendCommand"], kinds
    saved = decision.run.model_copy(update={"version": decision.run.version + 1})
    cold_save, _ = best_ms(lambda: dynamo_item({**RunStore(store.table).item_of(saved), **KEYS}, AS_IS))
    # the run read, then saved, in turn: the store's last item differs from each by the steps the pass changed
    turns = cycle([got, saved])
    save, _ = best_ms(lambda: dynamo_item({**store.item_of(next(turns)), **KEYS}, AS_IS))
    assert store.item_of(saved) == RunStore(store.table).item_of(saved), "the cached save's item differs"
    return {"cold read": cold, "read": read, "decide": decide, "cold save": cold_save, "save": save}


def main(sizes: list[int]) -> None:
    print("| steps | cold read ms | read ms | decide ms | cold save ms | save ms | pass ms (read, decide, save) |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for steps in sizes:
        got = measure(steps)
        total = got["read"] + got["decide"] + got["save"]
        cells = " | ".join(f"{got[k]:.2f}" for k in ("cold read", "read", "decide", "cold save", "save"))
        print(f"| {steps} | {cells} | {total:.2f} |", flush=True)


if __name__ == "__main__":
    main([300, 1000])
