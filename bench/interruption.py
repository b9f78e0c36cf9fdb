"""Benchmark of the Spot interruption path on the local world (not a test; results go to BENCHMARKS.md).

Measures, over ``--runs`` runs each:

1. handler invocation -> node cordoned: the interruption handler (warm, in this process) is called with a Spot
   warning for a worker; the time until a watch on the node sees ``spec.unschedulable`` set by the agent
   (``python -m agent``, its own process, long-polling the moto server's SQS). Target p50 <= 1 s.
2. drain of a node with 30 pods whose grace periods are 0: ``DrainEngine.run`` (cordon, evict in parallel, watch the
   pods go), with the agent's own least-privilege identity. Target <= 1 s.
3. ``kubectl drain --ignore-daemonsets --delete-emptydir-data --force`` of an identically loaded node, in the same
   run, alternating with 2; reports our time divided by kubectl's (target <= 0.3).

Usage: ``python -m bench.interruption --runs 20``; ``--smoke`` is one run of each and does not judge the numbers.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

import boto3
from kubernetes import client as k8s
from kubernetes import watch

from adapters.dynamo.store import Store
from agent.drain.engine import DrainEngine
from agent.kube.client import KubeAdapter, make_api_client
from core.model import Command, CommandKind, CommandStatus
from core.settings import AgentSettings, InterruptionSettings
from lambdas.interruption.handler import Deps, handle
from localworld.aws import aws_env
from localworld.lambda_context import INTERRUPTION_FUNCTION, LocalLambdaContext
from localworld.workloads import deploy_pods_on_node
from localworld.world import LocalWorld, Spawned
from scenarios.spot import spot_warning

PODS = 30


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def _worker_nodes(world: LocalWorld) -> list[dict[str, Any]]:
    assert world.simulator is not None, "the world's cluster is set up"
    return [
        n
        for n in world.simulator.nodes()
        if "node-role.kubernetes.io/node" in n["metadata"].get("labels", {})
        and not n.get("spec", {}).get("unschedulable")
    ]


def wait_cordoned(core: k8s.CoreV1Api, node_name: str, resource_version: str, timeout: float) -> float:
    """Block on a watch until ``node_name`` is unschedulable; return ``time.perf_counter()`` at that moment."""
    w = watch.Watch()  # type: ignore[no-untyped-call]  # kubernetes client: watch.Watch has no annotations
    try:
        for event in w.stream(  # type: ignore[no-untyped-call]  # kubernetes client: watch.Watch has no annotations
            core.list_node,
            field_selector=f"metadata.name={node_name}",
            resource_version=resource_version,
            timeout_seconds=int(timeout),
        ):
            if event["object"].spec.unschedulable:
                return time.perf_counter()
    finally:
        w.stop()  # type: ignore[no-untyped-call]  # kubernetes client: watch.Watch has no annotations
    raise TimeoutError(f"{node_name} not cordoned within {timeout} s")


def bench_cordon(world: LocalWorld, runs: int, log_dir: str) -> list[float]:
    """Handler invocation -> node cordoned, ``runs`` times, each on a fresh worker (the previous one is reclaimed)."""
    info = world.cluster
    assert info is not None and world.simulator is not None
    agent = world.spawn("agent", log_path=f"{log_dir}/agent-bench.log")
    store = Store(world.resource("dynamodb").Table(info.table_name), info.name)
    node_total = len(world.simulator.nodes())
    _wait(lambda: len(store.list_nodes(600)) >= node_total, 60, "membership")
    # the handler's clients reach the world's moto server through the environment, for this bench only
    env = {"POWERTOOLS_SERVICE_NAME": "interruption", "POWERTOOLS_METRICS_NAMESPACE": "NodeManager"}
    env.update(aws_env(world.moto.endpoint_url, world.region))
    with mock.patch.dict(os.environ, env):
        return _cordon_runs(world, runs, store, agent)


def _cordon_runs(world: LocalWorld, runs: int, store: Store, agent: Spawned) -> list[float]:
    info = world.cluster
    assert info is not None and world.simulator is not None
    deps = Deps.from_session(InterruptionSettings.from_env(info.env()), boto3.session.Session())
    deps.register_context(LocalLambdaContext(30, INTERRUPTION_FUNCTION))
    core = k8s.CoreV1Api(world.api)
    ec2 = world.client("ec2")
    latencies: list[float] = []
    sink = io.StringIO()
    workers = len(_worker_nodes(world))
    for i in range(runs):
        node = _worker_nodes(world)[0]
        name = node["metadata"]["name"]
        instance_id = node["spec"]["providerID"].rsplit("/", 1)[1]
        meta = core.read_node(name).metadata
        assert meta is not None and meta.resource_version is not None  # the API server sets both
        rv = meta.resource_version
        event = spot_warning(instance_id, world.region, datetime.now(UTC))
        with contextlib.redirect_stdout(sink):
            start = time.perf_counter()
            handle(event, deps)
        cordoned = wait_cordoned(core, name, rv, timeout=30)
        latencies.append(cordoned - start)
        command_id = f"spot-{event['id']}"
        _wait(
            lambda command_id=command_id: (
                (item := store.get_command(command_id)) and CommandStatus(item["status"]).terminal
            ),
            60,
            f"command {command_id}",
        )
        ec2.terminate_instances(InstanceIds=[instance_id])  # Spot reclaims it; the detach already replaced it
        _wait(
            lambda instance_id=instance_id: (
                len(_worker_nodes(world)) >= workers and world.simulator.node_for_instance(instance_id) is None
            ),
            60,
            "the replacement to be Ready",
        )
        print(f"  cordon run {i + 1:2d}: {latencies[-1] * 1000:7.1f} ms", file=sys.stderr)
    agent.stop()
    return latencies


def bench_drain(world: LocalWorld, runs: int) -> tuple[list[float], list[float]]:
    """Our drain vs ``kubectl drain`` of identically loaded nodes (30 grace-0 pods each), alternating."""
    assert world.cluster is not None
    settings = AgentSettings.from_env(world.cluster.env())
    cfg = world.kube.configuration("agent")
    engine = DrainEngine(KubeAdapter(make_api_client(cfg, pool_maxsize=40)), settings, events=None)
    core = k8s.CoreV1Api(world.api)
    ours: list[float] = []
    theirs: list[float] = []
    nodes = _worker_nodes(world)
    a, b = nodes[0], nodes[1]
    for i in range(runs):
        for node, who in ((a, "ours"), (b, "kubectl")) if i % 2 == 0 else ((b, "kubectl"), (a, "ours")):
            name = node["metadata"]["name"]
            rs = deploy_pods_on_node(world.api, name, PODS, grace=0, namespace="bench", name=f"fill-{who}-{i}")
            if who == "ours":
                instance_id = node["spec"]["providerID"].rsplit("/", 1)[1]
                cmd = Command(
                    command_id=f"bench-{uuid.uuid4()}",
                    cluster=world.cluster.name,
                    kind=CommandKind.DRAIN,
                    instance_id=instance_id,
                    node_name=name,
                    deadline=datetime.now(UTC) + timedelta(seconds=60),
                )
                start = time.perf_counter()
                result = engine.run(cmd)
                ours.append(time.perf_counter() - start)
                if result.status is not CommandStatus.SUCCEEDED:
                    raise RuntimeError(f"our drain {result.status}: {result.message}")
            else:
                start = time.perf_counter()
                subprocess.run(
                    [
                        "kubectl",
                        "--kubeconfig",
                        str(world.kubeconfig),
                        "drain",
                        name,
                        "--ignore-daemonsets",
                        "--delete-emptydir-data",
                        "--force",
                        "--timeout=60s",
                    ],
                    check=True,
                    capture_output=True,
                )
                theirs.append(time.perf_counter() - start)
            # Back to an identical empty, schedulable node for the next round.
            k8s.AppsV1Api(world.api).delete_namespaced_replica_set(rs, "bench", grace_period_seconds=0)
            core.patch_node(
                name,
                {"spec": {"unschedulable": None}, "metadata": {"annotations": {"node-manager.aws/cordoned-by": None}}},
            )
            core.delete_collection_namespaced_pod("bench", grace_period_seconds=0)
        print(
            f"  drain run {i + 1:2d}: ours {ours[-1] * 1000:7.1f} ms, kubectl {theirs[-1] * 1000:7.1f} ms",
            file=sys.stderr,
        )
    return ours, theirs


def _wait(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"waiting for {what}")
        time.sleep(0.02)
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.interruption", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--logs", default="/tmp/node-manager-bench")
    parser.add_argument("--smoke", action="store_true", help="one run of each measure; numbers not judged")
    args = parser.parse_args(argv)
    if args.smoke:
        args.runs = 1
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    os.makedirs(args.logs, exist_ok=True)
    with LocalWorld(log_dir=args.logs) as world:
        world.setup_cluster()
        cordon = bench_cordon(world, args.runs, args.logs)
        ours, theirs = bench_drain(world, args.runs)
    ratio = [o / t for o, t in zip(ours, theirs, strict=True)]
    rows = [
        ("handler invocation -> node cordoned", cordon, 1.0),
        (f"drain of a node with {PODS} grace-0 pods (ours)", ours, 1.0),
        ("kubectl drain of an identical node", theirs, None),
    ]
    print(f"\n{args.runs} runs each, {os.cpu_count()} CPUs, {datetime.now(UTC):%Y-%m-%d}\n")
    print("| measure | p50 | p99 | min | max | target |")
    print("|---|---|---|---|---|---|")
    for label, values, target in rows:
        p50, p99 = percentile(values, 50), percentile(values, 99)
        verdict = "" if target is None else (f"p50 <= {target:g} s: {'met' if p50 <= target else 'MISSED'}")
        print(f"| {label} | {p50:.3f} s | {p99:.3f} s | {min(values):.3f} s | {max(values):.3f} s | {verdict} |")
    r50, r99 = percentile(ratio, 50), percentile(ratio, 99)
    print(
        f"| ours / kubectl (per run) | {r50:.3f} | {r99:.3f} | {min(ratio):.3f} | {max(ratio):.3f} | "
        f"<= 0.3: {'met' if r50 <= 0.3 else 'MISSED'} |"
    )
    print(
        f"\nmean: cordon {statistics.mean(cordon):.3f} s, ours {statistics.mean(ours):.3f} s, "
        f"kubectl {statistics.mean(theirs):.3f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
