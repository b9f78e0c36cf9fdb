"""``core.rowread.unpack`` sorts its steps by keys read in C (a row's step by the row's first value) and looks a row
up once in its memo: it answers what the general path answers (each step's ``index`` read by ``_get``, a row looked
up by ``in`` then ``[]``), for items whose rows and steps in flight come in any order, some indexes twice, read
again and again (a row's first read, its second, its later ones), with and without ``make``."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.dynamo.table import dynamo, plain
from core import rowread
from core.runs import RunStep, StepState, _read_copy
from tests.unit.core.weekly_run import weekly_refresh


def general(
    data: Mapping[str, Any], make: Callable[[dict[str, Any]], Any] | None, copy: Callable[[Any], Any] | None
) -> dict[str, Any]:
    """``unpack`` as it was: a row looked up by ``in`` then ``[]``, the steps sorted by ``_get`` of each."""
    out = dict(data)
    rows = out.pop("rows", None)
    words = [str(w) for w in out.pop("words", None) or []]
    if not rows:
        return out
    created_at = datetime.fromisoformat(str(out["created_at"]))
    groups = [(rowread._get(g, "name"), rowread._get(g, "role")) for g in out.get("groups") or []]
    run_id = str(out.get("run_id", ""))
    steps = list(out.get("steps") or [])
    if make is None or copy is None:
        steps += [rowread._step(row, groups, words, created_at, run_id) for row in rows]
    else:
        made = rowread._rows_read((make, run_id, created_at, tuple(groups), tuple(words)))
        for row in rows:
            key = (len(row) > 3 and row[3] is True, *row)
            if key not in made:
                fields = rowread._step(row, groups, words, created_at, run_id)
                made[key] = rowread._Once(fields)
                steps.append(fields)
                continue
            done = made[key]
            if isinstance(done, rowread._Once):
                try:
                    done = made[key] = make(done.fields)
                except ValueError:
                    steps.append(done.fields)
                    continue
            steps.append(copy(done))
    out["steps"] = sorted(steps, key=lambda s: int(rowread._get(s, "index")))
    return out


def shaped(steps: list[Any]) -> list[tuple[type, Any]]:
    """Each step's type and content (a map's items, a step's fields)."""
    return [(type(s), s if isinstance(s, dict) else s.model_dump()) for s in steps]


@settings(max_examples=60, deadline=None)
@given(
    size=st.integers(1, 9),
    done=st.integers(0, 9),
    flying=st.sets(st.integers(0, 8), max_size=3),
    twice=st.sets(st.integers(0, 8), max_size=2),
    seed=st.integers(0, 2**16),
    answered=st.booleans(),
    maker=st.sampled_from(["model", "dict", "none"]),
)
def test_unpack_answers_as_the_general_path(
    size: int, done: int, flying: set[int], twice: set[int], seed: int, answered: bool, maker: str
) -> None:
    run = weekly_refresh(size, min(done, size))
    for k in flying & set(range(size)):  # steps in flight stay maps, among the rows
        run.steps[k] = run.steps[k].model_copy(update={"state": StepState.SURGING})
    item = plain(dynamo(run.to_item()))
    shuffle = random.Random(seed).shuffle
    rows = [*item.get("rows", []), *(item["rows"][k] for k in twice if k < len(item.get("rows", [])))]
    shuffle(rows)  # out of order, an index twice (a corrupt item): the sort is stable
    item["rows"] = [[Decimal(v) if answered and type(v) is int else v for v in row] for row in rows]
    shuffle(item["steps"])
    makers: dict[str, tuple[Callable[[dict[str, Any]], Any] | None, Callable[[Any], Any] | None]] = {
        "model": (RunStep.model_validate, _read_copy),
        "dict": (dict, dict),
        "none": (None, None),
    }
    make, copy = makers[maker]
    with pytest.MonkeyPatch.context() as patch:
        for _ in range(3):  # a row's first read, its second (made), its third (copied)
            patch.setattr(rowread, "_READ", {})
            fast = [rowread.unpack(item, make, copy) for _ in range(3)]
            patch.setattr(rowread, "_READ", {})
            slow = [general(item, make, copy) for _ in range(3)]
            for got, want in zip(fast, slow, strict=True):
                assert shaped(got.pop("steps", [])) == shaped(want.pop("steps", [])) and got == want
