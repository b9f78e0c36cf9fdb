"""Benchmark of the fleet simulation's speed: wall seconds per seed for N nodes over D simulated days, with the
default fault profile, every invariant checked after every step (issue 12, "Speed").

Measures ``sim.run.run_seed`` (world build, run, end checks) with ``time.perf_counter`` (the simulation itself reads
no wall clock) and prints, per seed, the wall time, the simulated steps, the steps per wall second and the
simulated-to-wall ratio.

Usage: ``python -m bench.sim_speed --nodes 300 --days 7 --seeds 3 [--first 0]``.
"""

from __future__ import annotations

import argparse
import time

from sim.run import run_seed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=300)
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first", type=int, default=0)
    args = parser.parse_args(argv)
    print("| seed | nodes | days | faults | steps | wall s | steps/s | simulated/wall | verdict |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    failed = 0
    for seed in range(args.first, args.first + args.seeds):
        started = time.perf_counter()
        result = run_seed(seed, args.nodes, args.days)
        wall = time.perf_counter() - started
        verdict = "ok" if result.violation is None else f"violation: {result.violation.invariant}"
        failed += result.violation is not None
        print(
            f"| {seed} | {args.nodes} | {args.days:g} | {len(result.schedule)} | {result.steps} | {wall:.1f} | "
            f"{result.steps / wall:.0f} | {args.days * 86400 / wall:.0f}x | {verdict} |",
            flush=True,
        )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
