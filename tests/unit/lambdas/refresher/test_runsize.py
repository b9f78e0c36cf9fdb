"""A run is refused at its start when its ``RUN#`` item would outgrow the size guard while it runs, not only when it
would not fit at its creation (``lambdas/refresher/runsize.py``; the start on moto)."""

from __future__ import annotations

from typing import Any

import pytest

import lambdas.refresher.start as start
from adapters.dynamo.runs import RunStore
from core.runpeak import peak_run
from core.runs import Run
from lambdas.refresher.handler import handle
from lambdas.refresher.runsize import too_large
from tests.unit.core.run_plans import planned
from tests.unit.lambdas.refresher.moto_cluster import moto_cluster


class Keys:
    """The one thing ``RunStore`` asks of its table to measure an item: its keys."""

    def key(self, sk: str) -> dict[str, str]:
        return {"pk": "CLUSTER#demo", "sk": sk}


def store(guard: int) -> RunStore:
    return RunStore(Keys(), guard_bytes=guard)  # type: ignore[arg-type]  # measuring only: no call is made


def sizes(run: Run) -> tuple[int, int]:
    runs = store(10**9)
    return runs.size(run.run_id, runs.item_of(run)), runs.size(run.run_id, runs.item_of(peak_run(run)))


def test_a_run_that_fits_at_creation_but_outgrows_the_guard_while_it_runs_is_refused() -> None:
    run = planned(10, {"nodes-a": 300, "nodes-b": 300})
    created, peak = sizes(run)
    assert created * 2 < peak  # finished rows and ten baselines of 310 ids

    reason = too_large(store((created + peak) // 2), run)

    assert reason is not None and "would grow to" in reason and f"{peak} bytes while it runs" in reason, reason
    assert "600 steps finished, up to 10 in flight" in reason and "fewer instance groups" in reason
    assert too_large(store(peak), run) is None  # the boundary: a peak at the guard fits


def test_a_run_over_the_guard_at_its_creation_says_so() -> None:
    run = planned(1, {"nodes": 50})
    created, _ = sizes(run)
    reason = too_large(store(created - 1), run)
    assert reason is not None and "ItemTooLarge" in reason and "would grow" not in reason


@pytest.mark.parametrize("max_surge", [1, 3])
def test_a_smaller_max_surge_lets_a_larger_run_fit(max_surge: int) -> None:
    run = planned(max_surge, {"nodes": 400})
    _, peak_1 = sizes(planned(1, {"nodes": 400}))
    _, peak_3 = sizes(planned(3, {"nodes": 400}))
    assert peak_1 < peak_3
    assert (too_large(store(peak_1), run) is None) is (max_surge == 1)


def test_the_start_refuses_it_before_the_lock_and_writes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Run] = []

    def measured(runs: RunStore, run: Run) -> str | None:
        seen.append(run)
        return too_large(runs, run)

    monkeypatch.setattr(start, "too_large", measured)
    with moto_cluster(monkeypatch) as cluster:
        cluster.tag_as_kops_workers()
        deps = cluster.new_deps()
        request: dict[str, Any] = {"action": "refresh", "cluster": "demo", "all": True, "max_surge": 2}
        dry = handle({**request, "dry_run": True}, deps)
        assert dry["status"] == "dry_run" and not dry.get("refusal") and len(seen[-1].steps) == 2, dry
        created, peak = sizes(seen[-1])
        assert created < peak
        deps.runs = RunStore(deps.store, guard_bytes=(created + peak) // 2)

        out = handle(request, deps)

        assert out["status"] == "refused" and "while it runs" in out["reason"], out
        assert deps.runs.list(5) == [] and deps.lock.current() is None and cluster.sizes() == (2, 3)
        dry = handle({**request, "dry_run": True}, deps)
        assert dry["status"] == "dry_run" and "while it runs" in dry["refusal"]
