"""Run models (core.runs): the lock holder names of a run's invocations."""

from __future__ import annotations

import doctest

import core.runs
from core.runs import lock_holder, run_id_of_holder


def test_doctests() -> None:
    assert doctest.testmod(core.runs).failed == 0


def test_every_invocation_is_a_holder_of_its_own_that_names_its_run() -> None:
    names = {lock_holder("20240101T000000Z-ab12cd", f"req-{n}") for n in range(3)}
    assert len(names) == 3 and {run_id_of_holder(n) for n in names} == {"20240101T000000Z-ab12cd"}
    assert run_id_of_holder("refresher:") is None and run_id_of_holder(None) is None
