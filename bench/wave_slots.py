"""Benchmark of a wave of Spot warnings larger than the agent's drain slots, on the fleet simulation (not a test;
results go to BENCHMARKS.md): the same seeded world and wave with every drain waiting for one of
``AGENT_CONCURRENCY`` slots (``DRAIN_URGENT_SECONDS=0``, as before the setting) and with the default (a drain whose
instance ends within that many seconds starts at once, ``agent.consumer.schedule.urgent_drain``).

The wave: ``--wave`` warnings, half in each of two AZs, spread over 30 s, one simulated hour in; the run goes on for
``--hours`` (the reclaims, the replacements). Reported per setting: pods killed by a reclaim (still on the node when
its instance went), pods stopped by an eviction or a delete, drains admitted over the slots, and the verdict of every
invariant. The simulation's pods: Deployments spread over the workers, 10 % of them with a 300 s grace period (capped
to the deadline by the drain), a DaemonSet, PodDisruptionBudgets (``sim.world``).

Usage: ``python -m bench.wave_slots --nodes 300 --wave 180 --slots 64``; ``--smoke`` is 30 nodes, a wave of 16 and
2 slots (numbers not judged).
"""

from __future__ import annotations

import argparse
import time

from sim.mutants import agent_overrides
from sim.run import run_seed
from sim.schedules import Fault

AZS = ("us-east-1a", "us-east-1b")


def wave(count: int, at: float = 3600.0) -> tuple[Fault, ...]:
    """``count`` Spot warnings over 30 s at simulated second ``at``, split between two AZs."""
    half = count // 2
    return tuple(
        Fault(at, "spot_burst", 30.0, (("az", az), ("count", n)))
        for az, n in zip(AZS, (count - half, half), strict=True)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=300)
    parser.add_argument("--wave", type=int, default=180)
    parser.add_argument("--slots", type=int, default=64)
    parser.add_argument("--hours", type=float, default=2.4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    if args.smoke:
        args.nodes, args.wave, args.slots, args.hours = 30, 16, 2, 1.2
    print(
        "| DRAIN_URGENT_SECONDS | nodes | wave | slots | pods killed by the reclaim | stopped by eviction | "
        "stopped by delete | CPU s | verdict |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    failed = 0
    for urgent in (0, 300):
        cpu = time.process_time()
        with agent_overrides({"drain_urgent_seconds": urgent, "concurrency": args.slots}):
            result = run_seed(args.seed, args.nodes, args.hours / 24, schedule=wave(args.wave))
        c = result.counters
        verdict = "ok" if result.violation is None else f"violation: {result.violation.invariant}"
        failed += result.violation is not None
        print(
            f"| {urgent} | {args.nodes} | {args.wave} | {args.slots} | {c['killed_by_reclaim']:g} | "
            f"{c['stopped_by_eviction']:g} | {c['stopped_by_delete']:g} | {time.process_time() - cpu:.1f} | "
            f"{verdict} |",
            flush=True,
        )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
