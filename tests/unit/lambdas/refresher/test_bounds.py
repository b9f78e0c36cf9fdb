"""The refresher's capacity bounds and their clamp at execution: a ``RUN#`` item with absurd targets (forged, or
left by a bug) never scales a group past its original MaxSize + the settings' surge limit (moto's Auto Scaling and
DynamoDB; the run advanced by ``advance_run`` as the tick would)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from core.kops import Role
from core.runs import DrainTimeoutPolicy
from lambdas.events.request import RefreshRequest
from lambdas.refresher import advance
from lambdas.refresher.bounds import capacity_bounds, request_refusals
from lambdas.refresher.world import GroupFacts, World
from tests.unit.lambdas.refresher.moto_cluster import SETTINGS, Cluster, moto_cluster, surging_run

LIMIT = SETTINGS.surge_limit


def facts(name: str = "nodes") -> GroupFacts:
    return GroupFacts(name, Role.NODE, name, 1, 3, 2)


def test_a_forged_original_max_size_cannot_raise_the_limit() -> None:
    world = World(groups={"nodes": facts()})
    bounds = capacity_bounds(surging_run("i-1", original_max=10**6), world, SETTINGS)["nodes"]
    assert (bounds.min_size, bounds.max_limit) == (1, 3 + LIMIT)
    lower = capacity_bounds(surging_run("i-1", original_max=1), world, SETTINGS)["nodes"]
    assert lower.max_limit == 1 + LIMIT  # a lower record only lowers it


def test_only_the_runs_groups_get_bounds() -> None:
    world = World(groups={"nodes": facts(), "other": facts("other")})
    assert set(capacity_bounds(surging_run("i-1"), world, SETTINGS)) == {"nodes"}


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    with moto_cluster(monkeypatch) as c:
        yield c


def test_a_forged_run_with_absurd_targets_is_clamped_at_execution_and_counted(cluster: Cluster) -> None:
    deps = cluster.new_deps()
    deps.runs.create(surging_run(cluster.instances()[0], original_desired=500, raised=500))  # desired 1000
    out = advance.advance_run(deps, None, 0.0)
    clamped = [a["result"] for a in out["actions"] if a["result"].startswith("updated, clamped")]
    assert clamped and "above the limit" in clamped[0], out["actions"]
    assert cluster.sizes() == (3 + LIMIT, 3 + LIMIT)
    assert "CapacityClamped" in cluster.telemetry.counted


def test_a_run_within_its_bounds_is_applied_as_recorded(cluster: Cluster) -> None:
    deps = cluster.new_deps()
    deps.runs.create(surging_run(cluster.instances()[0]))
    out = advance.advance_run(deps, None, 0.0)
    assert [a["result"] for a in out["actions"] if a["result"].startswith("updated")] == ["updated"]
    assert cluster.sizes() == (3, 3) and "CapacityClamped" not in cluster.telemetry.counted


def refresh(**fields: object) -> RefreshRequest:
    return RefreshRequest.model_validate({"cluster": "demo", **fields})


def test_request_bounds_come_from_the_settings() -> None:
    assert request_refusals(refresh(max_surge=3, drain_timeout="2m", drain_timeout_policy="pause"), SETTINGS) == []
    assert request_refusals(refresh(), SETTINGS) == []  # the settings' own defaults
    (surge,) = request_refusals(refresh(max_surge=4), SETTINGS)
    assert surge.startswith("max_surge: 4 is above the 3")
    (drain,) = request_refusals(refresh(drain_timeout="119s"), SETTINGS)
    assert drain.startswith("drain_timeout: 119 s is shorter than the 120 s")
    (policy,) = request_refusals(refresh(drain_timeout_policy="terminate"), SETTINGS)
    assert policy.startswith("drain_timeout_policy:")


def test_the_settings_own_values_are_always_allowed() -> None:
    own = SETTINGS.model_copy(
        update={"max_surge": 8, "drain_timeout_seconds": 30, "drain_timeout_policy": DrainTimeoutPolicy.TERMINATE}
    )
    assert request_refusals(refresh(max_surge=8, drain_timeout="30s", drain_timeout_policy="terminate"), own) == []
    assert len(request_refusals(refresh(max_surge=9, drain_timeout="29s"), own)) == 2
