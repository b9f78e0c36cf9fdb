"""Operating the agent: two replicas on the local kube-apiserver elect one leader through a real
``coordination.k8s.io/v1`` Lease (with the agent's own RBAC), the standby takes over within 15 s of the leader's
SIGKILL, a SIGTERM hands over at once (Lease released), probes and metrics are served, and the logs are JSON lines
carrying the command's id and node."""

from __future__ import annotations

import json
import re
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from agent.kube.client import KubeAdapter
from localworld.world import LocalWorld, Spawned
from tests.integration.agent.harness import Harness, log_of, wait_for

pytestmark = pytest.mark.world

NAMESPACE, LEASE = "node-manager", "node-manager-agent"
PORT_RE = re.compile(r"listening port=(\d+)")


def identity(agent: Spawned) -> str:
    return f"{socket.gethostname()}:{agent.pid}"


def holder(world: LocalWorld) -> str | None:
    lease = KubeAdapter(world.api).get_lease(NAMESPACE, LEASE)
    return None if lease is None else lease.holder


def port_of(agent: Spawned) -> int:
    match = wait_for(lambda: PORT_RE.search(log_of(agent)), 15, "the agent's HTTP port", agent)
    return int(match.group(1))


def http_get(agent: Spawned, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port_of(agent)}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def json_lines(agent: Spawned) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log_of(agent).splitlines() if line.startswith("{")]


def test_the_lease_adapter_refuses_a_write_based_on_a_stale_read(world: LocalWorld) -> None:
    kube = KubeAdapter(world.agent_api)  # the agent's identity: its Role allows leases in its namespace only
    spec = {"holderIdentity": "a", "leaseDurationSeconds": 10}
    created = kube.create_lease(NAMESPACE, "test-lease", spec)
    assert created is not None and created.holder == "a"
    assert kube.create_lease(NAMESPACE, "test-lease", spec) is None  # exists already
    renewed = kube.replace_lease(NAMESPACE, "test-lease", {**spec, "holderIdentity": "b"}, created.resource_version)
    assert renewed is not None and renewed.holder == "b"
    stale = kube.replace_lease(NAMESPACE, "test-lease", {**spec, "holderIdentity": "c"}, created.resource_version)
    assert stale is None and kube.get_lease(NAMESPACE, "test-lease").holder == "b"


def test_one_leader_works_the_standby_takes_over_within_15_s_of_a_sigkill(world: LocalWorld, tmp_path: Path) -> None:
    harness = Harness(world, world.setup_cluster(azs=("us-east-1a", "us-east-1b"), nodes_per_az=1), tmp_path)
    first = harness.agent("first")
    wait_for(lambda: holder(world) == identity(first), 15, "the first agent to lead", first)
    second = harness.agent("second")
    wait_for(lambda: http_get(second, "/readyz")[0] == 200, 15, "the standby to be ready", second)
    wait_for(lambda: http_get(first, "/readyz") == (200, "ok\n"), 10, "the leader to be ready (SQS polled)", first)
    assert http_get(first, "/healthz") == (200, "ok\n")
    assert "node_manager_agent_leader 1.0" in http_get(first, "/metrics")[1]
    assert "node_manager_agent_leader 0.0" in http_get(second, "/metrics")[1]

    # the leader works: it runs the drain (the standby does not poll), its log lines carry the command
    node, instance = harness.worker_node()
    harness.send(harness.command("drain-1", instance, deadline_in=60))
    wait_for(lambda: harness.status("drain-1") == "succeeded", 20, "drain-1 to succeed", first)
    item = harness.store.get_command("drain-1")
    assert item is not None and item["worker"] == identity(first)
    # the status is written before the command is counted: wait for the count rather than race it
    completed = 'node_manager_agent_commands_completed_total{kind="drain",result="succeeded"} 1.0'

    def counted() -> str:
        text = http_get(first, "/metrics")[1]
        return text if completed in text else ""

    metrics = wait_for(counted, 5, "drain-1 to be counted", first)
    assert "node_manager_agent_membership_nodes 4.0" in metrics
    lines = [line for line in json_lines(first) if line.get("command_id") == "drain-1"]
    assert any(line["message"].startswith("command started") for line in lines)
    assert any(line["message"].startswith("command finished") and line["node"] == node for line in lines)
    # every line about the command, and every line of the thread that worked it, carries its id
    worker_threads = {line["thread"] for line in lines if line["thread"].startswith("command-")}
    assert worker_threads
    for line in json_lines(first):
        if "drain-1" in line["message"] or line["thread"] in worker_threads:
            assert line.get("command_id") == "drain-1", line
    assert not any("membership resync" in line["message"] for line in json_lines(second))

    # SIGKILL the leader: the standby takes the Lease over within 15 s and works
    first.kill()
    killed_at = time.monotonic()
    wait_for(lambda: holder(world) == identity(second), 16, "the standby to take over", second)
    took = time.monotonic() - killed_at
    assert took < 15, f"takeover took {took:.1f} s"
    harness.send(harness.command("drain-2", instance, kind="uncordon", deadline_in=60))
    wait_for(lambda: harness.status("drain-2") == "succeeded", 20, "the new leader to run a command", second)
    assert harness.store.get_command("drain-2")["worker"] == identity(second)
    assert "node_manager_agent_leader 1.0" in http_get(second, "/metrics")[1]

    # SIGTERM: exits 0 within the grace period and releases the Lease
    started = time.monotonic()
    second.terminate()
    assert second.wait(timeout=AGENT_GRACE_LIMIT) == 0
    assert time.monotonic() - started < AGENT_GRACE_LIMIT
    assert holder(world) == ""
    assert any(line["message"].startswith("released the lease") for line in json_lines(second))


# SQS_WAIT_SECONDS 1 + AGENT_SHUTDOWN_GRACE_SECONDS 2 + release: far below a pod's 30 s grace period
AGENT_GRACE_LIMIT = 10.0


def test_a_sigterm_hands_over_at_once_to_the_standby(world: LocalWorld, tmp_path: Path) -> None:
    harness = Harness(world, world.setup_cluster(azs=("us-east-1a",), nodes_per_az=1), tmp_path)
    first = harness.agent("first")
    wait_for(lambda: holder(world) == identity(first), 15, "the first agent to lead", first)
    second = harness.agent("second")
    wait_for(lambda: http_get(second, "/readyz")[0] == 200, 15, "the standby to be ready", second)
    first.terminate()
    assert first.wait(timeout=AGENT_GRACE_LIMIT) == 0
    released_at = time.monotonic()
    wait_for(lambda: holder(world) == identity(second), 10, "the standby to take over", second)
    # released: no lease duration to wait out, only the standby's next round (2 s)
    assert time.monotonic() - released_at < 4
    assert any(line["message"].startswith("released the lease") for line in json_lines(first))
