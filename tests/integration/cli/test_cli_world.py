"""The operator CLI as an operator runs it (a subprocess, from a directory outside the checkout) against the local
world: plan, refresh/status/cancel in --local mode, and ``local up`` started and stopped with Ctrl-C."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from adapters.dynamo.store import Store
from cli.local import READY_LINE
from localworld.world import LocalWorld
from scenarios.observe import wait_until
from tests.processes import as_a_terminal_starts_it

ROOT = Path(__file__).resolve().parents[3]


def cli(world: LocalWorld, cwd: Path, *args: str, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = world.env({"REFRESH_WAIT_BUDGET_SECONDS": "2", "REFRESH_POLL_SECONDS": "0.1", **(extra or {})})
    return subprocess.run(
        [sys.executable, "-m", "cli", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120
    )


def desired(world: LocalWorld) -> dict[str, int]:
    groups = world.client("autoscaling").describe_auto_scaling_groups()["AutoScalingGroups"]
    return {g["AutoScalingGroupName"]: g["DesiredCapacity"] for g in groups}


def test_plan_shows_each_lambda_and_changes_nothing(cluster, world, tmp_path):
    before = desired(world)
    time.sleep(1.1)  # every instance is now older than REFRESH_MAX_AGE=1s
    done = cli(world, tmp_path, "plan", "--output", "json", extra={"REFRESH_MAX_AGE": "1s"})
    assert done.returncode == 0, done.stderr
    plans = json.loads(done.stdout)
    assert set(plans) == {"replenisher", "refresher", "interruption"}
    assert plans["replenisher"]["status"] in ("noted", "dry_run")
    assert plans["refresher"]["status"] == "dry_run"
    assert plans["refresher"]["steps"], plans["refresher"]  # every old instance would be replaced
    assert desired(world) == before
    text = cli(world, tmp_path, "plan", extra={"REFRESH_MAX_AGE": "1s"})
    assert text.returncode == 0 and "refresher: dry_run" in text.stdout and "step 1: replace" in text.stdout


def test_plan_with_a_bad_setting_names_it(cluster, world, tmp_path):
    done = cli(world, tmp_path, "plan", extra={"RECOVERY_HOLD_SECONDS": "abc", "REFRESH_MAX_SURGE": "abc"})
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and "setting" in done.stderr


def test_local_status_refresh_and_cancel_with_options_after_the_command(cluster, world, tmp_path):
    # a run needs the agent's membership (every node reported) before it starts
    world.spawn("agent", {"SQS_WAIT_SECONDS": "1"}, log_path=tmp_path / "agent.log")
    store = Store(world.resource("dynamodb").Table(cluster.table_name), cluster.name)
    nodes = len(world.running_simulator().nodes())
    wait_until(lambda: len(store.list_nodes(600)) >= nodes, 30, "the agent to report membership")
    status = cli(world, tmp_path, "status", "--local", "--cluster", cluster.name)
    assert status.returncode == 0, status.stderr
    assert status.stdout.startswith("status: ")
    # one table per pool, a row per group with the Ready nodes the agent reported (cli/status.py)
    lines = status.stdout.splitlines()
    assert "pool nodes (workers)" in lines, status.stdout
    row = next(line.split() for line in lines if line.split()[1:2] == [f"nodes-us-east-1a.{cluster.name}"])
    groups = world.client("autoscaling").describe_auto_scaling_groups()["AutoScalingGroups"]
    size = next(g["DesiredCapacity"] for g in groups if g["AutoScalingGroupName"] == row[1])
    #      AZ            desired    min-max InService  Pending Ready
    assert row[0] == "us-east-1a" and row[2] == str(size) and row[4] == row[6] == str(size), status.stdout
    started = cli(world, tmp_path, "refresh", "--all", "--instance-group", "nodes-us-east-1a", "--local")
    assert started.returncode == 0, started.stdout + started.stderr
    last = started.stdout.strip().splitlines()[-1]
    assert last.startswith("started run "), started.stdout
    run_id = last.split()[2]
    listed = cli(world, tmp_path, "status", "--local", "--output", "json")
    run = next(r for r in json.loads(listed.stdout)["runs"] if r["run_id"] == run_id)
    cancelled = cli(world, tmp_path, "cancel", "--local", "--run-id", run_id)
    if run["status"] in ("running", "pausing"):
        assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
    else:  # the run ended within the invocation's budget: a cancel is refused, exit 1
        assert cancelled.returncode == 1 and "status: refused" in cancelled.stdout
    # --cluster is honoured: in --local mode it names the cluster whose partition the handler reads (empty here)
    other = cli(world, tmp_path, "status", "--local", "--output", "json", "--cluster", "other.k8s.local")
    assert other.returncode == 0 and json.loads(other.stdout)["membership"] == []
    assert json.loads(listed.stdout)["membership"]


def test_local_up_runs_until_ctrl_c(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    errors = tmp_path / "up.stderr"
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli", "local", "up", "--nodes-per-az", "1", "--cluster", "up.k8s.local"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=errors.open("w"),
        text=True,
        preexec_fn=as_a_terminal_starts_it,
    )
    try:
        exports: dict[str, str] = {}
        assert proc.stdout is not None
        for line in proc.stdout:  # only export lines, then the ready line (progress goes to stderr)
            if line.strip() == READY_LINE:
                break
            _, assignment = shlex.split(line)
            name, _, value = assignment.partition("=")
            exports[name] = value
        else:
            pytest.fail(f"local up ended before it was ready: {errors.read_text()}")
        assert exports["CLUSTER_NAME"] == "up.k8s.local"
        endpoint = exports["AWS_ENDPOINT_URL"]
        status = subprocess.run(
            [sys.executable, "-m", "cli", "--local", "status", "--output", "json"],
            env={**env, **exports},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["status"]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 130, errors.read_text()  # Ctrl-C: 130, as every command of the CLI
        assert "stopping the local world" in errors.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with pytest.raises(OSError):
        urllib.request.urlopen(endpoint, timeout=2)
