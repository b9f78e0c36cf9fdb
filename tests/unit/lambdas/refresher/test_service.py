"""Manual refresh requests bounded by the settings: a payload asking for more surge, a shorter drain or the
``terminate`` policy than allowed is refused with the fields at fault, counted, and changes nothing (the handler on
moto)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from adapters.dynamo.runs import RunStore
from lambdas.refresher.handler import handle
from tests.unit.lambdas.refresher.moto_cluster import SETTINGS, Cluster, moto_cluster


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    with moto_cluster(monkeypatch) as c:
        yield c


def request(**fields: Any) -> dict[str, Any]:
    return {"action": "refresh", "cluster": "demo", "all": True, **fields}


@pytest.mark.parametrize(
    ("fields", "at_fault"),
    [
        ({"max_surge": SETTINGS.surge_limit + 1}, "max_surge"),
        ({"drain_timeout": "30s"}, "drain_timeout"),
        ({"drain_timeout_policy": "terminate"}, "drain_timeout_policy"),
    ],
)
def test_a_request_beyond_the_settings_is_refused_and_changes_nothing(
    cluster: Cluster, fields: dict[str, Any], at_fault: str
) -> None:
    deps = cluster.new_deps()
    out = handle(request(**fields), deps)
    assert (out["status"], out["reason"]) == ("rejected", "invalid_request"), out
    assert [e.split(":")[0] for e in out["errors"]] == [at_fault] and "settings" in out["error"]
    assert deps.runs.list(5) == [] and deps.lock.current() is None and cluster.sizes() == (2, 3)
    assert "RequestsRejected:invalid_request" in cluster.telemetry.counted


def test_a_dry_run_beyond_the_settings_is_refused_too(cluster: Cluster) -> None:
    out = handle(request(dry_run=True, max_surge=50, drain_timeout="10s"), cluster.new_deps())
    assert out["status"] == "rejected" and {e.split(":")[0] for e in out["errors"]} == {"max_surge", "drain_timeout"}


def test_a_request_within_the_settings_is_planned(cluster: Cluster) -> None:
    within = request(dry_run=True, max_surge=SETTINGS.surge_limit, drain_timeout="2m", drain_timeout_policy="pause")
    assert handle(within, cluster.new_deps())["status"] == "dry_run"


def test_the_settings_can_allow_terminate_and_shorter_drains(monkeypatch: pytest.MonkeyPatch) -> None:
    lenient = SETTINGS.model_copy(update={"request_allow_terminate": True, "request_min_drain_timeout_seconds": 10})
    with moto_cluster(monkeypatch, lenient) as cluster:
        out = handle(request(dry_run=True, drain_timeout="10s", drain_timeout_policy="terminate"), cluster.new_deps())
    assert out["status"] == "dry_run", out


def test_a_run_whose_record_would_not_fit_is_refused_before_the_lock(cluster: Cluster) -> None:
    cluster.tag_as_kops_workers()
    deps = cluster.new_deps()
    deps.runs = RunStore(deps.store, guard_bytes=500)  # the item of a run of two steps is about 0.9 KB
    out = handle(request(), deps)
    assert out["status"] == "refused" and "ItemTooLarge" in out["reason"], out
    assert deps.runs.list(5) == [] and deps.lock.current() is None and cluster.sizes() == (2, 3)
    dry = handle(request(dry_run=True), deps)
    assert dry["status"] == "dry_run" and "ItemTooLarge" in dry["refusal"]
