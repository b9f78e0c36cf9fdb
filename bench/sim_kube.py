"""Benchmark: what the simulation's in-memory Kubernetes (``sim.kube``) and the agent's drains on it
(``sim.agent_drain``) cost, in CPU time of this process (``time.process_time``: single-threaded work on a machine
shared with other work).

A cluster of ``--nodes`` workers, a DaemonSet, 20 Deployments filling ``--pods-per-node`` pods a node, each under a
PodDisruptionBudget (``maxUnavailable: 10%``). Then one simulated day of a rolling replacement, as a weekly
refresh or a Spot wave does it: every ``--period`` seconds one node is drained by the product's drain rules
(``SimDrain``: real ``DrainEngine`` cordon, ``plan_drain``, ``EvictionAttempts`` with backoff against the budgets,
``DrainProgress``), removed when its drain ends, and a new node joins. Reported: setup and day CPU seconds, kernel
steps, pods created, evictions accepted and refused, pods killed by a reclaim (0 expected: every node is drained
first), unschedulable pod-seconds. The simulation's speed target (issue 12: 1,000 nodes for 7 simulated days in
under 30 s a seed) divides by these.

Usage: ``python -m bench.sim_kube --nodes 1000 [--markdown]``; ``--smoke`` runs 30 nodes for an hour, numbers not
judged.
"""

from __future__ import annotations

import argparse
import time
from datetime import timedelta

from agent.drain.engine import DrainEngine
from agent.drain.results import NodeCommandResult
from core.model import Command, CommandKind, CommandStatus
from core.settings import AgentSettings
from sim.agent_drain import SimDrain
from sim.kernel import Kernel
from sim.kube import SimKube
from sim.kube_objects import Budget


def instance(i: int) -> str:
    return f"i-{i:017x}"


def run(nodes: int, pods_per_node: int, period: float, seconds: float) -> dict[str, float]:
    t0 = time.process_time()
    kernel = Kernel(seed=1)
    kube = SimKube(kernel, event_log=0, max_pods_per_node=pods_per_node + 10)
    for i in range(nodes):
        kube.add_node(f"n{i}", instance(i), "us-east-1a")
    kube.add_daemonset("kube-system", "cni")
    per_deployment = nodes * pods_per_node // 20
    for d in range(20):
        kube.add_deployment("default", f"d{d}", per_deployment, grace=30)
        kube.add_budget(Budget("default", f"d{d}", {"app": f"d{d}"}, max_unavailable="10%"))
    kernel.run(60)
    setup = time.process_time() - t0
    settings = AgentSettings(cluster_name="bench", table_name="t", queue_url="q")
    engine = DrainEngine(kube, settings, clock=kernel, rand=kernel.stream("bench:jitter").random)
    rand = kernel.stream("bench:backoff").random
    statuses: dict[str, int] = {}
    joined = [nodes]

    def ended(drain: SimDrain, end: NodeCommandResult | Exception) -> None:
        status = end.status.value if isinstance(end, NodeCommandResult) else type(end).__name__
        statuses[status] = statuses.get(status, 0) + 1
        kube.remove_instance(drain.command.instance_id)

    def replace() -> None:
        victim = sorted(kube.instances)[0]
        kube.add_node(f"n{joined[0]}", instance(joined[0]), "us-east-1a")
        joined[0] += 1
        command = Command(
            command_id=f"refresh-{victim}",
            cluster="bench",
            kind=CommandKind.DRAIN,
            instance_id=victim,
            reason="refresh",
            deadline=kernel.now() + timedelta(seconds=900),
        )
        SimDrain(kernel, kube, engine, command, rand, ended, lambda: 0).start()

    t1 = time.process_time()
    with kernel.installed():
        kernel.every(period, "bench:replace", replace)
        kernel.run(kernel.t + seconds)
    day = time.process_time() - t1
    c = kube.counters
    return {
        "setup_cpu_s": round(setup, 2),
        "run_cpu_s": round(day, 2),
        "steps": kernel.steps,
        "pods": len(kube.pods),
        "drains_succeeded": statuses.get(CommandStatus.SUCCEEDED.value, 0),
        "drains_other": sum(v for k, v in statuses.items() if k != CommandStatus.SUCCEEDED.value),
        "created": c.created,
        "evicted": c.stopped_by_eviction,
        "refused": c.evictions_refused,
        "killed_by_reclaim": c.killed_by_reclaim,
        "unschedulable_pod_s": round(kube.unschedulable_pod_seconds),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods-per-node", type=int, default=11)
    parser.add_argument("--period", type=float, default=60.0, help="seconds between node replacements")
    parser.add_argument("--seconds", type=float, default=86400.0, help="simulated seconds")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.nodes, args.seconds = 30, 3600.0
    out = run(args.nodes, args.pods_per_node, args.period, args.seconds)
    if args.markdown:
        print("| " + " | ".join(out) + " |")
        print("|" + "---|" * len(out))
        print("| " + " | ".join(str(v) for v in out.values()) + " |")
    else:
        for key, value in out.items():
            print(f"{key}: {value}")


if __name__ == "__main__":
    main()
