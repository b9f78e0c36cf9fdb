"""``core.rowcache``: a writer's next pack reuses the rows of the steps it packed before (the same objects) and gives
exactly what ``core.runrecord.pack`` gives (rows, words in their order, maps, every value's type) and the rows' size
as ``core.itemsize`` counts it, whatever changed between two packs."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

from adapters.dynamo.runs import RunStore
from adapters.dynamo.table import Table, dynamo
from core.itemsize import item_bytes, value_bytes
from core.rowcache import RowCache
from core.runrecord import pack
from core.runs import GroupSurge, Run, RunStatus, RunStep, StepState
from tests.unit.core.weekly_run import GROUPS, replaced, weekly_refresh


def typed(value: Any) -> Any:
    """``value`` with each scalar's exact type beside it (``True`` and ``1`` are equal in Python, not in an item)."""
    if isinstance(value, list | tuple):
        return [typed(v) for v in value]
    if isinstance(value, dict):
        return {k: typed(v) for k, v in value.items()}
    return (type(value), value)


def check(cache: RowCache, run: Run) -> int:
    """Pack ``run`` through ``cache`` and compare with ``pack``; the steps worked out again."""
    got = cache.pack(run.steps, run.groups, run.created_at, run_id=run.run_id)
    want = pack(run.steps, run.groups, run.created_at, run_id=run.run_id)
    assert typed(got[0]) == typed(want[0])
    assert got[1] == want[1]
    assert [id(s) for s in got[2]] == [id(s) for s in want[2]]
    assert cache.rows_bytes(got[0]) == value_bytes(want[0])
    return cache.reworked


def variant(step: RunStep, rng: random.Random) -> RunStep:
    """A new object for ``step``'s position: pending, in flight, or final with a note or times of its own."""
    kind = rng.randrange(6)
    if kind == 0:
        return RunStep(index=step.index, group=step.group, role=step.role, instance_id=step.instance_id)
    if kind == 1:
        spare = f"i-s{step.index}" if rng.random() < 0.5 else None
        return step.model_copy(update={"state": StepState.SURGING, "surge_instance_id": spare})
    done = replaced(step.index, step_at(step)).model_copy(update={"group": step.group})
    if kind == 2:
        return done.model_copy(update={"note": f"note {rng.randrange(4)}"})  # a word new or known
    if kind == 3:
        return done.model_copy(update={"node_name": done.instance_id, "drain_status": None})
    if kind == 4:
        return done.model_copy(update={"state": StepState.SKIPPED, "entered": {}, "started_at": None})
    return done


def step_at(step: RunStep) -> Any:
    return weekly_refresh(1, 0).created_at + timedelta(minutes=6 * step.index)


def test_a_pack_gives_what_pack_gives_and_reuses_the_steps_it_packed_before() -> None:
    rng = random.Random(19)
    run = weekly_refresh(60, 20)
    cache = RowCache()
    assert check(cache, run) == 60
    assert check(cache, run) == 0  # the same objects: nothing worked out again
    reused = 0
    for n in range(300):
        steps = list(run.steps)
        for position in rng.sample(range(len(steps)), rng.choice((1, 1, 2, 3, 12))):
            steps[position] = variant(steps[position], rng)
        if n % 37 == 5:  # a step more
            last = steps[-1]
            steps.append(RunStep(index=last.index + 1, group=GROUPS[0], role="node", instance_id=f"i-x{n}"))
        if n % 53 == 7:  # out of order next to a changed step: every step a map, as pack leaves them
            k = rng.randrange(1, len(steps))
            steps[k] = steps[k].model_copy(update={"index": steps[k - 1].index})
        if n % 61 == 9:  # another group first: every step's group has another position (a new context)
            extra = GroupSurge(name=f"g{n}", role="node", min_size=1, original_desired=1, original_max=1)
            run = run.model_copy(update={"groups": [extra, *run.groups]})
        run = run.model_copy(update={"steps": steps})
        reworked = check(cache, run)
        reused += reworked < len(steps) // 4
        assert run.to_item(cache=RowCache())["surge_instance_ids"] == run.surge_instance_ids
        if n % 53 == 7:  # back in order for the next passes
            run = run.model_copy(update={"steps": [s.model_copy(update={"index": k}) for k, s in enumerate(steps)]})
    assert reused > 100  # many reworked only what changed (the others moved a word's first row: all repacked)


def test_a_step_in_flight_changed_in_place_is_packed_as_it_is_now() -> None:
    run = weekly_refresh(9, 3)
    cache = RowCache()
    flying = run.steps[3] = run.steps[3].model_copy(update={"state": StepState.DRAINING})
    check(cache, run)
    done = replaced(3, step_at(flying))
    for name in ("state", "surge_instance_id", "command_id", "drain_status", "started_at", "finished_at", "note"):
        setattr(flying, name, getattr(done, name))
    flying.entered, flying.spare_ready_at = dict(done.entered), done.spare_ready_at
    check(cache, run)
    assert len(cache.pack(run.steps, run.groups, run.created_at, run_id=run.run_id)[0]) == 9  # a row now


def test_a_new_first_word_or_a_word_named_earlier_repacks_every_row() -> None:
    run = weekly_refresh(30, 20)
    run.steps[15] = run.steps[15].model_copy(update={"note": "first named at 15"})
    cache = RowCache()
    check(cache, run)
    steps = list(run.steps)
    steps[25] = replaced(25, step_at(steps[25])).model_copy(update={"note": "a new word at 25"})
    run = run.model_copy(update={"steps": steps})
    assert check(cache, run) == 1  # after every first: appended
    steps = list(steps)
    steps[5] = steps[5].model_copy(update={"note": "a new word at 5"})  # before a word first named at 15
    run = run.model_copy(update={"steps": steps})
    assert check(cache, run) == 30
    steps = list(steps)
    steps[10] = steps[10].model_copy(update={"note": "a new word at 25"})  # a word named before its first
    run = run.model_copy(update={"steps": steps})
    assert check(cache, run) == 30
    steps = list(steps)
    steps[15] = steps[15].model_copy(update={"note": "replaced"})  # the row a word was first named in
    run = run.model_copy(update={"steps": steps})
    assert check(cache, run) == 30
    steps = list(steps)
    steps[16] = steps[16].model_copy(update={"note": "a new word at 5"})  # known, named first before: reused
    assert check(cache, run.model_copy(update={"steps": steps})) == 1


def test_the_row_a_patch_first_named_a_word_in_is_such_a_row_at_the_next_patch() -> None:
    # a patch adds the words new to the run where its rows name them first: later patches know those rows as first
    # rows (one changed: every row repacked), that word as known (named after it: reused) and the last first row
    # (a new word before it: every row repacked), without a look at every word
    run = weekly_refresh(30, 20)
    cache = RowCache()
    check(cache, run)

    def patched(position: int, note: str) -> int:
        nonlocal run
        steps = list(run.steps)
        steps[position] = replaced(position, step_at(steps[position])).model_copy(update={"note": note})
        run = run.model_copy(update={"steps": steps})
        return check(cache, run)

    assert patched(22, "a new word at 22") == 1
    assert patched(24, "a new word at 22") == 1  # known, first named before
    assert patched(26, "a new word at 26") == 1  # new, after the last first row
    assert patched(25, "a new word at 25") == 30  # new, before the last first row (26)
    assert patched(27, "a new word at 27") == 1
    assert patched(27, "another at 27") == 30  # the row a word was first named in


def test_a_store_writes_and_sizes_the_item_it_wrote_without_the_cache() -> None:
    class Named:
        name = "t"

    store = RunStore(Table(Named(), "c"))
    run = weekly_refresh(90, 60)
    for n in range(5):
        steps = list(run.steps)
        steps[60 + n] = replaced(60 + n, step_at(steps[60 + n]))
        run = run.model_copy(update={"steps": steps, "version": n})
        item = store.item_of(run)
        fresh = RunStore(Table(Named(), "c"))
        assert typed(item["rows"]) == typed(fresh.item_of(run)["rows"]) and item == fresh.item_of(run)
        assert store.size(run.run_id, item) == item_bytes({**item, **store.table.key(store.sk(run.run_id))})
        assert store.rows.reworked == (90 if n == 0 else 1)
    stopping = run.model_copy(update={"status": RunStatus.PAUSING})
    shed = stopping.to_item(shed=True)  # rows of another pack: sized here, not from the cache
    assert typed(stopping.to_item(shed=True, cache=store.rows)) == typed(shed)
    assert store.size(run.run_id, shed) == item_bytes({**shed, **store.table.key(store.sk(run.run_id))})


def test_each_save_sends_the_item_a_whole_pack_sends() -> None:
    class Recording:
        name = "t"

        def __init__(self) -> None:
            self.sent: list[dict[str, Any]] = []

        def put_item(self, **kwargs: Any) -> None:
            self.sent.append(kwargs["Item"])

    table = Recording()
    store = RunStore(Table(table, "c"))
    run = weekly_refresh(45, 30)
    store.create(run)
    for n in range(4):
        steps = list(run.steps)
        steps[30 + n] = replaced(30 + n, step_at(steps[30 + n]))
        run = store.save(run.model_copy(update={"steps": steps}))
        assert store.rows.reworked == 1
        whole = RunStore(Table(table, "c")).item_of(run)  # a new store: every row packed
        assert typed(table.sent[-1]) == typed(dynamo({**whole, **store.table.key(store.sk(run.run_id))}))
