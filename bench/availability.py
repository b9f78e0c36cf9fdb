"""Availability benchmark (issue 12, item 6): one seeded bad week of a 3-AZ Spot cluster under three policies.

The same world (``sim.world.World``: kOps groups one per AZ, Deployments with PodDisruptionBudgets, pods with long
grace periods) and the same schedule of what happens to it, under:

- ``asg``: the Auto Scaling group alone: no lifecycle hook, no drain, no early replacement, no compensation (the
  product's Lambdas and agent are not there; the group replaces a reclaimed instance once it is gone, "Amazon EC2
  Auto Scaling: Spot Instance interruptions");
- ``drain``: drain-only, as aws-node-termination-handler does in queue mode (its README: on the Spot interruption
  warning, cordon the node and evict its pods through the Eviction API, honouring PodDisruptionBudgets; no early
  replacement, no compensation): an actor of this module on the same events;
- ``product``: this product (the three Lambdas' ``handle()`` and the agent, as ``python -m sim run`` runs them).

The schedule: Spot interruptions per AZ at the Spot Instance Advisor's frequency bands (``BANDS``: 5-10 %, 10-15 %,
15-20 % a month, the top of each band, as a Poisson process per AZ, plus bursts), rebalance recommendations (half
followed by an interruption), two capacity outages of 2-4 hours in two AZs, and the weekly refresh (the product's
scheduled rule, Sunday 03:00; the other two policies have no refresher, so their instances are not replaced).

Measured once a simulated minute: per pool (a kOps group), node-minutes below its desired size (Ready nodes of the
group vs the size kOps gave it), the longest stretch any pool stayed below; pods stopped by an eviction vs killed by
a reclaim (``sim.kube`` counters); unschedulable pod-minutes (Pending workload pods); extra instance-hours (running
instances above the groups' kOps sizes: surge and compensation).

Usage: ``python -m bench.availability --nodes 1000 --days 7 [--seed 1] [--policies asg,drain,product]``.
"""

from __future__ import annotations

import argparse
import random
import time
from dataclasses import dataclass, field
from typing import Any

from sim.kernel import Step
from sim.lambdas import Invocation
from sim.schedules import DAY, HOUR, Fault
from sim.world import AZS, NoAgent, Shape, World, default_agent

# Spot Instance Advisor frequency of interruption bands, as a monthly fraction of instances (the top of the band)
BANDS = {"us-east-1a": 0.10, "us-east-1b": 0.15, "us-east-1c": 0.20}
SAMPLE_SECONDS = 60.0
WARMUP_SECONDS = 900.0  # the cluster's first nodes register in the first minutes: not a loss of any policy
WARNING = "EC2 Spot Instance Interruption Warning"


def week(seed: int, nodes: int, days: float) -> tuple[Fault, ...]:
    """The schedule every policy runs (drawn from ``seed`` only, not from a world)."""
    rng = random.Random(f"availability:{seed}")
    end = days * DAY
    out: list[Fault] = []
    per_az = max(1, nodes // len(AZS))

    def poisson(rate: float) -> list[float]:
        times, t = [], rng.expovariate(rate) if rate > 0 else end
        while t < end:
            times.append(t)
            t += rng.expovariate(rate)
        return times

    for az, monthly in BANDS.items():
        out += [
            Fault(round(t, 3), "spot", 0.0, (("az", az), ("count", 1))) for t in poisson(monthly * per_az / (30 * DAY))
        ]
        for t in poisson(0.3 / DAY):
            count = rng.randint(2, max(2, per_az // 20))
            out.append(Fault(round(t, 3), "spot_burst", round(rng.uniform(60, 600), 3), (("az", az), ("count", count))))
    for t in poisson(1.0 * nodes / 100 / DAY):
        followed = int(rng.random() < 0.5)
        duration = round(rng.uniform(120, 3600), 3) if followed else 0.0
        out.append(Fault(round(t, 3), "rebalance", duration, (("az", rng.choice(AZS)), ("follow", followed))))
    for az in rng.sample(AZS, 2):
        start = rng.uniform(0.1 * end, 0.8 * end)
        out.append(Fault(round(start, 3), "outage", round(rng.uniform(2 * HOUR, 4 * HOUR), 3), (("az", az),)))
    return tuple(sorted(out))


@dataclass
class Meter:
    """What a policy's run measured (see the module docstring)."""

    policy: str
    below: dict[str, float] = field(default_factory=dict)  # pool -> node-minutes below desired
    longest: float = 0.0  # seconds, any pool
    _since: dict[str, float] = field(default_factory=dict)
    extra_instance_seconds: float = 0.0
    base_instance_seconds: float = 0.0
    _last: float = -1e18
    cpu: float = 0.0
    counters: dict[str, float] = field(default_factory=dict)

    def sample(self, world: World, t: float) -> None:
        if t < WARMUP_SECONDS or t - self._last < SAMPLE_SECONDS:
            return
        self._last = t
        ready: dict[str, int] = {}
        for obj in world.kube.nodes.values():
            if any(c.get("type") == "Ready" and c.get("status") == "True" for c in obj["status"].get("conditions", ())):
                instance = world.cloud.instances.get(str(obj["spec"].get("providerID", "")).rsplit("/", 1)[-1])
                if instance is not None and instance.group is not None:
                    ready[instance.group] = ready.get(instance.group, 0) + 1
        base = world.view.baseline()
        for name, (desired, _max) in sorted(base.items()):
            if name.startswith("master-"):
                continue
            short = max(0, desired - ready.get(name, 0))
            self.below[name] = self.below.get(name, 0.0) + short * SAMPLE_SECONDS / 60
            if short:
                since = self._since.setdefault(name, t)
                self.longest = max(self.longest, t - since + SAMPLE_SECONDS)
            else:
                self._since.pop(name, None)
        alive = sum(1 for i in world.cloud.instances.values() if i.alive)
        wanted = sum(d for d, _ in base.values())
        self.extra_instance_seconds += max(0, alive - wanted) * SAMPLE_SECONDS
        self.base_instance_seconds += wanted * SAMPLE_SECONDS


class Nth:
    """Drain-only, as aws-node-termination-handler in queue mode: on a Spot interruption warning, cordon the node and
    evict its workload pods (Eviction API, PodDisruptionBudgets honoured: a 429 is retried every 5 s) until none is
    left or the instance is gone. Nothing else: no early replacement, no compensation."""

    def __init__(self, world: World) -> None:
        self.world = world

    def invoke(self, function: str, event: dict[str, Any], *_args: Any, **_kwargs: Any) -> Invocation:
        if function == "interruption" and event.get("detail-type") == WARNING:
            detail = event.get("detail") or {}
            instance = str(detail.get("instance-id", ""))
            node = self.world.kube.node_for_instance(instance)
            if node is not None:
                self.world.kube.patch_node(node.name, {"spec": {"unschedulable": True}})
                self._evict(node.name, instance)
        return Invocation(function, "ok", {})

    def _evict(self, node: str, instance: str) -> None:
        kube = self.world.kube
        inst = self.world.cloud.instances.get(instance)
        if inst is None or not inst.alive or node not in kube.nodes:
            return
        left = 0
        for key in sorted(kube.by_node.get(node, {})):
            info = kube.pods.get(key)
            if info is None or not info.workload or info.terminating:
                continue
            namespace, name = key.split("/", 1)
            response = kube.evict_pod(namespace, name)
            left += response.http_status == 429 or response.http_status >= 500
        if left:
            self.world.kernel.after(5.0, "nth evict", lambda: self._evict(node, instance))


def _no_invoke(function: str, event: dict[str, Any], *_args: Any, **_kwargs: Any) -> Invocation:
    return Invocation(function, "ok", {})


def run_policy(policy: str, seed: int, nodes: int, days: float, schedule: tuple[Fault, ...]) -> Meter:
    """One policy's week: the world, the schedule, the meter."""
    agent = default_agent if policy == "product" else (lambda _world: NoAgent())
    world = World(seed, Shape(nodes=nodes, masters=3), agent=agent)
    world._populate()  # World.build without its default agent
    if policy != "product":
        for group in world.cloud.groups.values():
            group.hooks = ()  # no termination lifecycle hook: nobody would complete it
        world.bus.invoke = Nth(world).invoke if policy == "drain" else _no_invoke
    meter = Meter(policy)
    world.apply(schedule)
    started = time.process_time()

    def after(step: Step) -> None:
        meter.sample(world, step.at)

    from sim.invariants import Violation

    try:
        world.run(days * DAY, after)
    except Violation as found:  # the product's invariants are still checked; a violation is reported, not hidden
        meter.counters["violation"] = 1.0
        print(f"  {policy}: {found}")
    meter.cpu = time.process_time() - started
    c = world.kube.counters
    meter.counters.update(
        {
            "stopped_by_eviction": float(c.stopped_by_eviction),
            "stopped_by_delete": float(c.stopped_by_delete),
            "killed_by_reclaim": float(c.killed_by_reclaim),
            "cut_short": float(c.cut_short),
            "unschedulable_pod_minutes": world.kube.unschedulable_pod_seconds / 60,
        }
    )
    return meter


def table(meters: list[Meter]) -> str:
    """The Markdown table of the module docstring's measures, one row per policy."""
    pools = sorted({p for m in meters for p in m.below})
    head = ["policy", *[f"node-min below desired {p}" for p in pools], "longest below (min)"]
    head += ["pods evicted", "pods deleted past PDB", "pods killed by reclaim", "unschedulable pod-min"]
    head += ["extra instance-h", "extra %", "CPU s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for m in meters:
        c = m.counters
        extra_h = m.extra_instance_seconds / 3600
        share = 100 * m.extra_instance_seconds / m.base_instance_seconds if m.base_instance_seconds else 0.0
        row = [m.policy, *[f"{m.below.get(p, 0.0):.0f}" for p in pools], f"{m.longest / 60:.0f}"]
        row += [f"{c['stopped_by_eviction']:.0f}", f"{c['stopped_by_delete']:.0f}", f"{c['killed_by_reclaim']:.0f}"]
        row += [f"{c['unschedulable_pod_minutes']:.0f}", f"{extra_h:.1f}", f"{share:.2f}", f"{m.cpu:.0f}"]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--policies", default="asg,drain,product")
    args = parser.parse_args(argv)
    schedule = week(args.seed, args.nodes, args.days)
    print(f"seed {args.seed}: {args.nodes} nodes, {args.days:g} days, {len(schedule)} schedule entries", flush=True)
    meters = []
    for policy in args.policies.split(","):
        meters.append(run_policy(policy, args.seed, args.nodes, args.days, schedule))
        print(f"  {policy} done in {meters[-1].cpu:.0f} s CPU", flush=True)
    print(table(meters))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
