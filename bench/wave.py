"""Benchmark of a wave of Spot warnings and of a pod whose grace outlasts the deadline, on the local world (not a test;
results go to BENCHMARKS.md).

**Wave** (``--sizes 20,50,100 --runs 5``): a fresh cluster per run with ``size`` warned workers carrying 5 pods each
(one ReplicaSet per node, grace 0, 5, 10, 20 or 30 s) plus a ``web`` Deployment under a PodDisruptionBudget
(maxUnavailable 1) spread over the workers, a few spare workers, and the agent (``python -m agent``, its own process,
production settings). The interruption handler (warm, in this process, as in a warm Lambda) is called once per warned
worker, back to back. Reported per run: time from the first handler call to the last node cordoned (and from the last
call), to the last drain finished, drains that ended ``succeeded`` before their deadline, and pods bound to a node
after that node's warning (target 0), counted from the start of the node's handler call, from its return (its drain
command is queued: from then on a binding is the agent's delay) and from the node's cordon (from then on a binding is
the scheduler's: the local world's ReplicaSet controller places a new pod from its cached view of the nodes).
Cordon times come from a watch on Nodes.

Bindings are ordered by ``resourceVersion``, not by when the benchmark's watch saw them: a watch event can arrive
seconds late on a loaded machine (the watch threads share this process with the back-to-back handler calls), and a
pod bound just before its node's warning was then counted as bound after it. kube-apiserver's etcd3 storage gives
every write one global revision (an object's ``resourceVersion``; opaque to clients by contract, but one counter on
this apiserver v1.20 + etcd), so a pod's binding (the first watch event with ``spec.nodeName``, at its revision), the
node's cordon (the first with ``spec.unschedulable``) and the revisions read just before and just after each handler
call (a one-item list, whose ``metadata.resourceVersion`` is the store's current revision) are on one clock. The
counts by the watch's arrival time are printed too (``seen late``).

**Grace** (``--grace``): one worker carries a pod with ``terminationGracePeriodSeconds`` 180; a Spot warning gives
it 120 s. Reported: when the pod got its deletion (``metadata.deletionTimestamp`` seen by a watch: the SIGTERM) and
when it was gone, both relative to the deadline (target: gone before it).

Usage: ``python -m bench.wave --sizes 20,50 --runs 5 --grace``; ``--smoke`` is one wave of 6 (pod grace 0-2 s) and a
grace run with 15 s left and a 30 s grace (numbers not judged). ``--agent-env KEY=VALUE`` changes the agent's settings
(e.g. ``AGENT_CONCURRENCY=4 AGENT_MAX_IN_FLIGHT=4``, close to the agent before issue 9).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import os
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
from kubernetes import client as k8s

from adapters.dynamo.store import Store
from bench.interruption import percentile
from bench.wave_watch import NAMESPACE, Recorder, WaveResult
from core.model import CommandStatus
from core.settings import InterruptionSettings
from lambdas.interruption.handler import Deps, handle
from localworld.aws import aws_env
from localworld.lambda_context import INTERRUPTION_FUNCTION, LocalLambdaContext
from localworld.workloads import create_deployment, create_pdb, deploy_pods_on_node, ensure_namespace, pod_template
from localworld.world import LocalWorld
from scenarios.spot import spot_warning

GRACES: tuple[int, ...] = (0, 5, 10, 20, 30)
PODS_PER_NODE = 5
WORKER_LABEL = "node-role.kubernetes.io/node"


def workers(world: LocalWorld) -> list[tuple[str, str]]:
    """(node name, instance id) of the schedulable workers."""
    assert world.simulator is not None
    found = []
    for node in world.simulator.nodes():
        if WORKER_LABEL in node["metadata"].get("labels", {}) and not node.get("spec", {}).get("unschedulable"):
            found.append((node["metadata"]["name"], node["spec"]["providerID"].rsplit("/", 1)[1]))
    return sorted(found)


def handler_deps(world: LocalWorld) -> Deps:
    """The interruption handler's dependencies, built once per cluster (a warm Lambda)."""
    assert world.cluster is not None
    os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "interruption")
    os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "NodeManager")
    os.environ.update(aws_env(world.moto.endpoint_url, world.region))
    deps = Deps.from_session(InterruptionSettings.from_env(world.cluster.env()), boto3.session.Session())
    deps.register_context(LocalLambdaContext(30, INTERRUPTION_FUNCTION))
    return deps


def prepare(
    world: LocalWorld,
    size: int,
    spare: int,
    log_dir: str,
    tag: str,
    agent_env: dict[str, str] | None = None,
    graces: tuple[int, ...] = GRACES,
) -> tuple[list[tuple[str, str]], Store]:
    """A fresh cluster with ``size`` loaded workers to warn (plus ``spare``), the agent running (its production
    settings, changed by ``agent_env``) with its membership reported. Returns the workers to warn and the table."""
    world.reset()
    per_az = math.ceil((size + spare) / 3)
    info = world.setup_cluster(nodes_per_az=per_az, timeout=120)
    ensure_namespace(world.api, NAMESPACE)
    targets = workers(world)[:size]
    for i, (name, _) in enumerate(targets):
        deploy_pods_on_node(world.api, name, PODS_PER_NODE, grace=graces[i % len(graces)], name=f"fill-{i}", wait=False)
    template = pod_template("web", grace=5)
    create_deployment(world.api, NAMESPACE, "web", max(2, min(10, size // 2)), template)
    create_pdb(world.api, NAMESPACE, "web", {"app": "web"}, max_unavailable=1)
    core = k8s.CoreV1Api(world.api)
    wanted = size * PODS_PER_NODE + max(2, min(10, size // 2))
    _wait(lambda: _ready_pods(core) >= wanted, 180, f"{wanted} pods Ready")
    store = Store(world.resource("dynamodb").Table(info.table_name), info.name)
    world.spawn("agent", agent_env or {}, log_path=f"{log_dir}/agent-wave-{tag}.log")
    total = len(world.simulator.nodes()) if world.simulator is not None else 0
    _wait(lambda: len(store.list_nodes(600)) >= total, 120, "membership")
    return targets, store


@contextlib.contextmanager
def _environ_restored() -> Iterator[None]:
    """Put ``os.environ`` back as it was: ``handler_deps`` points it at the world's moto server and region, which a
    later boto3 client of the same process (a test's ``mock_aws``) would otherwise read."""
    saved = dict(os.environ)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def run_wave(world: LocalWorld, targets: list[tuple[str, str]], store: Store, timeout: float = 240) -> WaveResult:
    """Warn every target at once (back-to-back handler calls) and measure (see the module docstring); the process
    environment is left as it was."""
    with _environ_restored():
        return _run_wave(world, targets, store, timeout)


def _run_wave(world: LocalWorld, targets: list[tuple[str, str]], store: Store, timeout: float) -> WaveResult:
    deps = handler_deps(world)
    core = k8s.CoreV1Api(world.api)
    recorder = Recorder(core).start()
    result = WaveResult(size=len(targets))
    warned: dict[str, float] = {}
    commanded: dict[str, float] = {}
    warned_rv: dict[str, int] = {}
    commanded_rv: dict[str, int] = {}
    command_ids: list[str] = []
    sink = io.StringIO()
    t0 = time.time()
    for name, instance_id in targets:
        event = spot_warning(instance_id, world.region, datetime.now(UTC))
        warned_rv[name] = revision(core)
        warned[name] = time.time()
        with contextlib.redirect_stdout(sink):
            handle(event, deps)
        commanded[name] = time.time()
        commanded_rv[name] = revision(core)
        command_ids.append(f"spot-{event['id']}")
    result.calls_span = time.time() - t0
    names = [name for name, _ in targets]
    with contextlib.suppress(TimeoutError):
        _wait(lambda: all(n in recorder.cordoned for n in names), 60, "every warned node cordoned")
    if all(n in recorder.cordoned for n in names):
        result.last_cordon = max(recorder.cordoned[n] for n in names) - t0
    items: dict[str, dict[str, Any]] = {}

    def all_terminal() -> bool:
        for command_id in command_ids:
            if command_id in items:
                continue
            item = store.get_command(command_id)
            if item is not None and CommandStatus(item["status"]).terminal:
                items[command_id] = item
        return len(items) == len(command_ids)

    with contextlib.suppress(TimeoutError):
        _wait(all_terminal, timeout, "every drain finished", interval=0.5)
    recorder.stop()
    result.terminal = len(items)
    finished = []
    for item in items.values():
        status = str(item["status"])
        result.statuses[status] = result.statuses.get(status, 0) + 1
        end = datetime.fromisoformat(str(item.get("finished_at") or item.get("updated_at")))
        finished.append(end.timestamp())
        deadline = datetime.fromisoformat(str(item["command"]["deadline"]))
        if status == CommandStatus.SUCCEEDED.value and end <= deadline:
            result.before_deadline += 1
    if finished and len(items) == len(command_ids):
        result.last_drain = max(finished) - t0
    onto = [b for b in recorder.bindings if b[2] in warned_rv]
    result.seen_after_warned = sum(1 for t, _, node, _, _ in onto if t > warned[node])
    result.seen_after_commanded = sum(1 for t, _, node, _, _ in onto if t > commanded[node])
    result.onto_warned = sum(1 for _, _, node, rv, _ in onto if rv > warned_rv[node])
    result.onto_commanded = sum(1 for _, _, node, rv, _ in onto if rv > commanded_rv[node])
    result.onto_cordoned = sum(1 for _, _, node, rv, _ in onto if rv > recorder.cordoned_rv.get(node, 1 << 62))
    result.onto_schedulable = sum(
        1 for _, _, node, rv, _ in onto if commanded_rv[node] < rv <= recorder.cordoned_rv.get(node, 1 << 62)
    )
    for seen, _, node, rv, pod in onto:
        if rv <= warned_rv[node]:
            continue
        cordoned = recorder.cordoned_rv.get(node)
        when = (
            "after its cordon"
            if cordoned is not None and rv > cordoned
            else "after its command was queued, before its cordon"
            if rv > commanded_rv[node]
            else "during its handler call, before its cordon"
        )
        result.onto.append(
            f"{pod} -> {node} {when}: bound at revision {rv} (seen {seen - t0:.2f} s), warned at {warned_rv[node]}, "
            f"command queued by {commanded_rv[node]}, cordoned at {cordoned} "
            f"(seen {recorder.cordoned.get(node, math.inf) - t0:.2f} s)"
        )
    return result


def revision(core: k8s.CoreV1Api) -> int:
    """The store's current revision: a one-item list is read from etcd, and its ``metadata.resourceVersion`` is the
    revision it was read at."""
    meta = core.list_namespaced_pod(NAMESPACE, limit=1).metadata
    assert meta is not None and meta.resource_version is not None  # a list carries the revision it was read at
    return int(meta.resource_version)


def bench_grace(world: LocalWorld, log_dir: str, grace: int, left: float) -> dict[str, float]:
    """One pod with ``grace`` s on a worker whose Spot warning leaves ``left`` s; times relative to the deadline."""
    world.reset()
    world.setup_cluster(nodes_per_az=1, timeout=60)
    ensure_namespace(world.api, NAMESPACE)
    name, instance_id = workers(world)[0]
    deploy_pods_on_node(world.api, name, 1, grace=grace, name="slow")
    assert world.cluster is not None
    store = Store(world.resource("dynamodb").Table(world.cluster.table_name), world.cluster.name)
    world.spawn("agent", log_path=f"{log_dir}/agent-grace.log")
    total = len(world.simulator.nodes()) if world.simulator is not None else 0
    _wait(lambda: len(store.list_nodes(600)) >= total, 60, "membership")
    deps = handler_deps(world)
    core = k8s.CoreV1Api(world.api)
    on_node: list[str] = []
    for p in core.list_namespaced_pod(NAMESPACE).items:
        assert p.metadata is not None and p.metadata.name is not None and p.spec is not None  # the API server sets them
        if p.spec.node_name == name:
            on_node.append(p.metadata.name)
    [pod] = on_node
    recorder = Recorder(core).start()
    warned_at = datetime.now(UTC) - timedelta(seconds=120 - left)
    event = spot_warning(instance_id, world.region, warned_at)
    deadline = datetime.strptime(event["time"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp() + 120
    with contextlib.redirect_stdout(io.StringIO()):
        handle(event, deps)
    _wait(lambda: pod in recorder.gone, left + 30, "the pod to be gone", interval=0.2)
    recorder.stop()
    command_id = f"spot-{event['id']}"
    item = _wait(
        lambda: (i := store.get_command(command_id)) and CommandStatus(i["status"]).terminal and i, 30, "drain end"
    )
    outcomes = (item.get("result") or {}).get("pods") or []
    return {
        "deletion_at": recorder.deleting.get(pod, math.inf) - deadline,
        "gone_at": recorder.gone[pod] - deadline,
        "granted": float(next((p.get("grace_seconds") or 0 for p in outcomes), 0)),
    }


def _ready_pods(core: k8s.CoreV1Api) -> int:
    ready = 0
    for pod in core.list_namespaced_pod(NAMESPACE).items:
        assert pod.status is not None and pod.metadata is not None  # the API server sets both
        conditions = pod.status.conditions or []
        if pod.metadata.deletion_timestamp is None and any(
            c.type == "Ready" and c.status == "True" for c in conditions
        ):
            ready += 1
    return ready


def _wait(predicate: Any, timeout: float, what: str, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"waiting for {what}")
        time.sleep(interval)
    return value


def _seconds(value: float) -> str:
    return "not reached" if math.isinf(value) else f"{value:.2f} s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.wave", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20,50,100", help="wave sizes, comma-separated")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--spare", type=int, default=3, help="unwarned workers besides the wave")
    parser.add_argument("--grace", action="store_true", help="also the Grace benchmark (180 s grace, 120 s left)")
    parser.add_argument("--agent-env", action="append", default=[], help="KEY=VALUE for the agent (repeatable)")
    parser.add_argument("--logs", default="/tmp/node-manager-bench")
    parser.add_argument("--smoke", action="store_true", help="a wave of 6 and a short grace run; numbers not judged")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    grace, left, graces = 180, 120.0, GRACES
    if args.smoke:
        sizes, args.runs, args.grace, grace, left, graces = [6], 1, True, 30, 15.0, (0, 2)
    os.makedirs(args.logs, exist_ok=True)
    agent_env = dict(pair.split("=", 1) for pair in args.agent_env)
    results: dict[int, list[WaveResult]] = {}
    grace_runs: list[dict[str, float]] = []
    with LocalWorld(log_dir=args.logs) as world:
        for size in sizes:
            for run in range(args.runs):
                targets, store = prepare(world, size, args.spare, args.logs, f"{size}-{run}", agent_env, graces)
                result = run_wave(world, targets, store)
                results.setdefault(size, []).append(result)
                print(
                    f"  wave {size} run {run + 1}: calls {result.calls_span:.2f} s, last cordon "
                    f"{_seconds(result.last_cordon)}, last drain {_seconds(result.last_drain)}, "
                    f"before deadline {result.before_deadline}/{size}, onto warned {result.onto_warned} "
                    f"(after the command: {result.onto_commanded}, "
                    f"of them before the cordon: {result.onto_schedulable}; "
                    f"after the cordon: {result.onto_cordoned}; "
                    f"by the watch's arrival time: {result.seen_after_warned} / {result.seen_after_commanded}), "
                    f"statuses {result.statuses}",
                    file=sys.stderr,
                )
                for line in result.onto:
                    print(f"    onto a warned node: {line}", file=sys.stderr)
        if args.grace:
            grace_runs.append(bench_grace(world, args.logs, grace, left))
    print(f"\n{args.runs} run(s) per size, {os.cpu_count()} CPUs, {datetime.now(UTC):%Y-%m-%d}\n")
    print(
        "| wave | handler calls span | first call -> last cordon, p50 / p99 | last call -> last cordon, p99 "
        "(target <= 2 s) | first call -> last drain, p50 / p99 | drains succeeded before deadline (worst run) "
        "| pods bound to a warned node after its handler call started / returned / its cordon (total; target 0 "
        "after it returned) |"
    )
    print("|---|---|---|---|---|---|---|")
    for size, runs in results.items():
        cordon = [r.last_cordon for r in runs]
        after = [r.cordon_after_last_call for r in runs]
        drain = [r.last_drain for r in runs]
        print(
            f"| {size} | {percentile([r.calls_span for r in runs], 50):.2f} s | "
            f"{_seconds(percentile(cordon, 50))} / {_seconds(percentile(cordon, 99))} | "
            f"{_seconds(percentile(after, 99))} | "
            f"{_seconds(percentile(drain, 50))} / {_seconds(percentile(drain, 99))} "
            f"| {min(r.before_deadline for r in runs)}/{size} "
            f"| {sum(r.onto_warned for r in runs)} / {sum(r.onto_commanded for r in runs)} / "
            f"{sum(r.onto_cordoned for r in runs)} |"
        )
    for g in grace_runs:
        print(
            f"\nGrace: pod grace {grace} s, {left:.0f} s left at the warning: deletion (SIGTERM) at "
            f"{g['deletion_at']:+.1f} s, gone at {g['gone_at']:+.1f} s relative to the deadline "
            f"(grace granted {g['granted']:.0f} s; target: gone before the deadline)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
