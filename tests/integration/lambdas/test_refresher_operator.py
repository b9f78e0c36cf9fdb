"""The refresher on the local world, as an operator drives it (``test_refresher.py`` has the runs themselves): a dry
run changes nothing, an invalid manual payload is rejected, another region's or account's events are acknowledged
and change nothing, the CLI runs the handler locally, and a finished run's record draws every instance and the groups'
Ready nodes. The handler in this process, the agent as its own process, moto's Auto Scaling, the real kube-apiserver
with the simulator, and the event pump playing EventBridge (scenarios/refreshing.py).
"""

from __future__ import annotations

import io
from datetime import UTC, datetime
from typing import Any

import pytest

from core.runs import RunStatus
from scenarios.fleetchart import FleetRecorder
from scenarios.refreshing import RefreshHarness
from scenarios.timeline import Timeline
from tests.integration.lambdas.refresh_helpers import harness

pytestmark = pytest.mark.world


def test_a_dry_run_changes_nothing(world: Any) -> None:
    info = world.setup_cluster(azs=("us-east-1a",), nodes_per_az=1)
    with harness(world, info) as h:
        before = h.groups()
        items = h.store.table.scan()["Items"]
        response = h.refresh(all=True, dry_run=True)
        assert response["status"] == "dry_run"
        assert "NEEDS-UPDATE" in response["table"] and len(response["steps"]) == 2
        assert {r["group"] for r in response["groups"]} == set(info.all_asgs)
        assert all(a["result"] == "dry run: not done" for a in response["actions"])
        assert h.groups() == before
        assert h.store.table.scan()["Items"] == items  # no RUN#, no LOCK, no CMD#


@pytest.mark.parametrize(
    "payload,field",
    [
        ({"action": "refresh"}, "cluster"),
        ({"action": "refresh", "cluster": "demo.k8s.local", "max_age": "soon"}, "max_age"),
        ({"action": "refresh", "cluster": "demo.k8s.local", "max_age": "7d", "all": True}, "either max_age or all"),
        ({"action": "refresh", "cluster": "demo.k8s.local", "max_surge": 0}, "max_surge"),
        ({"action": "refresh", "cluster": "demo.k8s.local", "drain_timeout": "1s"}, "drain_timeout"),
        ({"action": "refresh", "cluster": "demo.k8s.local", "max_surge": 50}, "max_surge"),  # beyond the settings
        (
            {"action": "refresh", "cluster": "demo.k8s.local", "drain_timeout_policy": "terminate"},
            "drain_timeout_policy",
        ),
        ({"action": "refresh", "cluster": "demo.k8s.local", "selection": "all"}, "selection"),
        ({"action": "reboot", "cluster": "demo.k8s.local"}, "action"),
    ],
)
def test_an_invalid_manual_payload_is_rejected_and_changes_nothing(
    world: Any, payload: dict[str, Any], field: str
) -> None:
    info = world.setup_cluster(azs=("us-east-1a",), nodes_per_az=1, wait_ready=False)
    h = RefreshHarness(world, info)
    before = h.groups()
    response = h.invoke(payload)
    assert response["status"] == "rejected" and response["reason"] == "invalid_request"
    assert any(field in e for e in response["errors"]), response["errors"]
    assert h.groups() == before and list(h.store.query_prefix("RUN#")) == []
    h.invoker.close()


@pytest.mark.parametrize(
    ("envelope", "reason"),
    [({"region": "eu-west-1"}, "foreign_region"), ({"account": "210987654321"}, "foreign_account")],
)
def test_another_regions_or_accounts_events_are_acknowledged_and_change_nothing(
    world: Any, envelope: dict[str, str], reason: str
) -> None:
    from localworld.eventbus import launch_event, scheduled_event

    info = world.setup_cluster(azs=("us-east-1a",), nodes_per_az=1, wait_ready=False)
    h = RefreshHarness(world, info)
    before = h.groups()
    group = info.worker_asgs["us-east-1a"]
    now = datetime.now(UTC)
    for raw in (
        scheduled_event("node-manager-refresh-tick", time=now),
        launch_event(group, successful=True, time=now, instance_id="i-0123456789abcdef0"),
    ):
        response = h.invoke({**raw, **envelope})
        assert response["status"] == "acknowledged" and response["reason"] == reason, response
        # the same event from home is the refresher's to judge (not out of scope)
        assert h.invoke(raw).get("reason") != reason
    assert h.groups() == before and list(h.store.query_prefix("RUN#")) == []
    h.invoker.close()


def test_the_cli_runs_the_handler_locally_against_the_world(world: Any) -> None:
    import subprocess
    import sys

    from localworld.world import REPO_ROOT

    info = world.setup_cluster(azs=("us-east-1a",), nodes_per_az=1)
    env = world.env({"POWERTOOLS_SERVICE_NAME": "refresher"})
    before = RefreshHarness(world, info).groups()

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "cli", "--local", *args],
            env=env,
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )

    # No agent runs here, so no master is known Ready: the dry run still shows the plan, says the real run would be
    # refused and why, and exits 1 as the real run would.
    dry = cli("refresh", "--dry-run", "--all")
    assert dry.returncode == 1, dry.stderr
    assert "refusal:" in dry.stdout and "master" in dry.stdout
    assert (
        "status: dry_run" in dry.stdout
        and "NEEDS-UPDATE" in dry.stdout
        and info.worker_asgs["us-east-1a"] in dry.stdout
    )
    status = cli("status")
    assert status.returncode == 0 and "lock: free" in status.stdout and "ledger (COMP#): 0" in status.stdout
    bad = cli("refresh", "--max-age", "soon")
    assert bad.returncode == 1 and "invalid_request" in bad.stdout
    none = cli("cancel")
    assert none.returncode == 1 and "no active run" in none.stdout
    assert RefreshHarness(world, info).groups() == before


def test_a_finished_runs_record_draws_each_instance_and_the_groups_ready_nodes(world: Any, tmp_path: Any) -> None:
    """``node-manager status --run ID --chart FILE`` on a run the refresher carried out: the picture read back (its
    SVG ids) has the old instance's surge, drain and terminate, its spare's launch and Ready, and the group's Ready
    nodes going up by the spare and down by the old one; the scenarios' recorder, watching beside it, sees the same."""
    import xml.etree.ElementTree as ET

    from charts.runrecord import run_chart
    from cli.main import main

    info = world.setup_cluster(azs=("us-east-1a",), nodes_per_az=1)
    worker_asg = info.worker_asgs["us-east-1a"]
    recorder = FleetRecorder(world, Timeline(out=io.StringIO(), progress=io.StringIO()), interval=0.1)
    recorder.start()  # what `python -m scenarios NAME --chart FILE` records beside a scenario
    with harness(world, info) as h:
        response = h.refresh(all=True, instance_groups=[worker_asg])
        run = h.wait_run(response["run"]["run_id"], 60)
    recorder.stop()
    assert run.status is RunStatus.SUCCEEDED, run.reason
    (step,) = run.steps
    assert list(step.entered) == ["surging", "draining", "terminating", "done"] and step.spare_ready_at is not None

    path, out, err = tmp_path / "run.svg", [], []
    argv = ["status", "--run", run.run_id, "--chart", str(path), "--cluster", info.name, "--function-name", "f"]
    assert main(argv, environ={}, invoker=h.invoke, out=out.append, err=err.append) == 0, err
    assert out[-1] == f"chart: {path} (2 instance rows, 1 groups)"
    ids = [e.get("id", "") for e in ET.parse(path).iter() if "|" in e.get("id", "")]
    phases = {
        iid: [i.split("|")[2] for i in ids if i.startswith(f"span|{iid}|")]
        for iid in (step.instance_id, step.surge_instance_id)
    }
    assert phases == {step.instance_id: ["surge", "drain", "terminate"], step.surge_instance_id: ["launch", "ready"]}
    assert [i for i in ids if i.startswith("pool|")] == ["pool|nodes-us-east-1a"]
    (pool,) = run_chart(run).pools
    assert [n for _, n in pool.points] == [1, 2, 1]  # the spare Ready, then the old instance terminated

    seen = recorder.chart("seen")  # the same run as the scenario recorder saw it: groups, nodes, the drain's CMD#
    rows = {r.instance_id: [s.phase.value for s in r.spans] for r in seen.rows}
    assert rows[step.instance_id][:2] == ["ready", "drain"] and "drained" in rows[step.instance_id], rows
    assert "ready" in rows[step.surge_instance_id], rows
    ready = {p.pool: [n for _, n in p.points] for p in seen.pools}
    assert ready["nodes-us-east-1a"] == [1, 2, 1], ready
