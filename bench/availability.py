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

Measured every ``--sample`` simulated seconds (a timer of its own, 60 s by default) after a 15-minute warm-up, per kOps
group (one group = one pool per AZ here): node-minutes below its desired size, where a node counts when it is Ready and
its instance runs and was launched for that group (its ``kops.k8s.io/instancegroup`` tag), whether a group still holds
the instance or not (``Meter``); the pool's total over its AZs; the longest stretch any group stayed below; the same
node-minutes counting only Ready nodes not cordoned, and counting only instances a group holds (the first version's
measure); pods stopped by an eviction vs killed by a reclaim (``sim.kube`` counters); unschedulable pod-minutes (Pending
workload pods, after the warm-up); extra instance-hours (running instances above the groups' kOps sizes: surge,
compensation, detached instances until their reclaim). Each missing node-minute of the group-member count is attributed
to a cause (``bench.availability_meter``: ``Meter._explain``, ``Causes``): printed as a second table.

Usage: ``python -m bench.availability --nodes 1000 --days 7 [--seed 1] [--policies asg,drain,product]
[--schedule week|outage-burst] [--only spot,spot_burst] [--sample 60] [--boot 30,60]``.
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

import sim.cloud
from bench.availability_meter import SAMPLE_SECONDS, WARMUP_SECONDS, Causes, Meter
from sim.lambdas import Invocation
from sim.schedules import DAY, HOUR, Fault
from sim.world import AZS, NoAgent, Shape, World, default_agent

# Spot Instance Advisor frequency of interruption bands, as a monthly fraction of instances (the top of the band)
BANDS = {"us-east-1a": 0.10, "us-east-1b": 0.15, "us-east-1c": 0.20}
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


def outage_burst(seed: int, nodes: int, days: float) -> tuple[Fault, ...]:
    """A targeted schedule (``--schedule outage-burst``): a 3-hour capacity outage in us-east-1a from hour 2, and a
    burst reclaiming a fifth of that AZ's instances within 10 minutes half an hour into it: what compensation in a
    sibling AZ is for (the week of ``week`` may have no reclaim during its outages)."""
    count = max(2, nodes // len(AZS) // 5)
    return (
        Fault(2 * HOUR, "outage", 3 * HOUR, (("az", "us-east-1a"),)),
        Fault(2.5 * HOUR, "spot_burst", 600.0, (("az", "us-east-1a"), ("count", count))),
    )


SCHEDULES = {"week": week, "outage-burst": outage_burst}


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


def run_policy(
    policy: str, seed: int, nodes: int, days: float, schedule: tuple[Fault, ...], sample: float = SAMPLE_SECONDS
) -> Meter:
    """One policy's week: the world, the schedule, the meter (sampling every ``sample`` simulated seconds)."""
    agent = default_agent if policy == "product" else (lambda _world: NoAgent())
    world = World(seed, Shape(nodes=nodes, masters=3), agent=agent)
    world._populate()  # World.build without its default agent
    if policy != "product":
        for group in world.cloud.groups.values():
            group.hooks = ()  # no termination lifecycle hook: nobody would complete it
        world.bus.invoke = Nth(world).invoke if policy == "drain" else _no_invoke
        # the product's invariants are not these policies' promises: a shortfall the ASG alone leaves uncovered
        # during an outage "breaks" invariant 8, and a violation would end their run early (shorter losses)
        world.checker.after_step = lambda step: None  # type: ignore[method-assign]  # the world's hook, replaced
    meter = Meter(policy, sample_seconds=sample, causes=Causes(world))
    world.apply(schedule)
    # a timer of its own, off the 10 s grid of Auto Scaling's reconcile: the state is sampled at evenly spaced
    # instants, not right after the steps that change it
    world.kernel.every(sample, "bench:sample", lambda: meter.sample(world, world.kernel.t), first=WARMUP_SECONDS + 0.5)
    started = time.process_time()

    from sim.invariants import Violation

    try:
        world.run(days * DAY)
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
            "unschedulable_pod_minutes": (world.kube.unschedulable_pod_seconds - (meter.pending_at_warmup or 0.0)) / 60,
        }
    )
    return meter


def table(meters: list[Meter]) -> str:
    """The Markdown table of the module docstring's measures, one row per policy."""
    groups = sorted({p for m in meters for p in m.below})
    pools = sorted({p for m in meters for p in m.below_pool})
    head = ["policy", *[f"node-min below desired {g}" for g in groups], *[f"pool {p} (all AZs)" for p in pools]]
    head += ["longest below (min)", "node-min below, schedulable nodes", "node-min below, group members only"]
    head += ["pods evicted", "pods deleted past PDB", "pods killed by reclaim", "unschedulable pod-min"]
    head += ["extra instance-h", "extra %", "CPU s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for m in meters:
        c = m.counters
        extra_h = m.extra_instance_seconds / 3600
        share = 100 * m.extra_instance_seconds / m.base_instance_seconds if m.base_instance_seconds else 0.0
        row = [m.policy, *[f"{m.below.get(g, 0.0):.0f}" for g in groups]]
        row += [f"{m.below_pool.get(p, 0.0):.0f}" for p in pools]
        row += [
            f"{m.longest / 60:.0f}",
            f"{sum(m.below_schedulable.values()):.0f}",
            f"{sum(m.below_member.values()):.0f}",
        ]
        row += [f"{c['stopped_by_eviction']:.0f}", f"{c['stopped_by_delete']:.0f}", f"{c['killed_by_reclaim']:.0f}"]
        row += [f"{c['unschedulable_pod_minutes']:.0f}", f"{extra_h:.1f}", f"{share:.2f}", f"{m.cpu:.0f}"]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def causes_table(meters: list[Meter]) -> str:
    """Node-minutes below desired counting group members only (``below_member``, all groups) by cause, one column
    per policy; node-minutes of Ready nodes cordoned, by the kind of command that cordoned them (the annotation's
    prefix; "unannotated": drain-only's cordon); then the group-member total and the table's (``below``): they
    differ by the first cause."""
    causes = sorted({c for m in meters for c in m.why})
    lines = ["| cause | " + " | ".join(m.policy for m in meters) + " |", "|---|" + "---|" * len(meters)]
    for cause in causes:
        lines.append(f"| {cause} | " + " | ".join(f"{m.why.get(cause, 0.0):.1f}" for m in meters) + " |")
    for reason in sorted({r for m in meters for r in m.cordoned}):
        row = " | ".join(f"{m.cordoned.get(reason, 0.0):.1f}" for m in meters)
        lines.append(f"| (not a loss) Ready node cordoned by {reason} | {row} |")
    members = " | ".join(f"{sum(m.below_member.values()):.1f}" for m in meters)
    lines.append(f"| **total, group members only** | {members} |")
    tagged = " | ".join(f"{sum(m.below.values()):.1f}" for m in meters)
    lines.append(f"| total, Ready nodes by instance-group tag (the table's measure) | {tagged} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--policies", default="asg,drain,product")
    parser.add_argument("--schedule", default="week", choices=sorted(SCHEDULES))
    parser.add_argument("--only", default="", help="keep only these schedule kinds (comma-separated)")
    parser.add_argument("--sample", type=float, default=SAMPLE_SECONDS, help="simulated seconds between samples")
    parser.add_argument(
        "--boot",
        default="",
        help="LOW,HIGH: an instance's pending -> running seconds (sim.cloud.BOOT_SECONDS, 30,60 by default); the "
        "kubelet registers its node 30-60 s after that",
    )
    args = parser.parse_args(argv)
    schedule = SCHEDULES[args.schedule](args.seed, args.nodes, args.days)
    if args.only:
        schedule = tuple(f for f in schedule if f.kind in args.only.split(","))
    print(f"seed {args.seed}: {args.nodes} nodes, {args.days:g} days, {len(schedule)} schedule entries", flush=True)
    boot = sim.cloud.BOOT_SECONDS
    if args.boot:
        low, high = (float(x) for x in args.boot.split(","))
        sim.cloud.BOOT_SECONDS = (low, high)  # read by Cloud at each launch; put back below
        print(f"boot {low:g}-{high:g} s", flush=True)
    meters = []
    try:
        for policy in args.policies.split(","):
            meters.append(run_policy(policy, args.seed, args.nodes, args.days, schedule, args.sample))
            print(f"  {policy} done in {meters[-1].cpu:.0f} s CPU", flush=True)
    finally:
        sim.cloud.BOOT_SECONDS = boot
    print(table(meters))
    print(causes_table(meters))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
