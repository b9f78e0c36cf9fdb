"""Benchmark of the fleet simulation's speed: wall seconds per seed for N nodes over D simulated days, with the
default fault profile, every invariant checked after every step (issue 12, "Speed").

Measures ``sim.run.run_seed`` (world build, run, end checks) with ``time.perf_counter`` and ``time.process_time``
(the simulation itself reads no wall clock), each seed after a full garbage collection outside its measure (the
previous seed's world is cyclic garbage: freeing it is that seed's teardown, not this one's simulation), and prints,
per seed, the wall and CPU seconds, the simulated steps, the steps per CPU second and the simulated-to-CPU ratio. On a
shared machine the CPU seconds are the comparable figure.

Usage: ``python -m bench.sim_speed --nodes 300 --days 7 --seeds 3 [--first 0]``.
"""

from __future__ import annotations

import argparse
import gc
import time

from sim.run import run_seed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=300)
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first", type=int, default=0)
    args = parser.parse_args(argv)
    print("| seed | nodes | days | faults | steps | wall s | CPU s | steps/CPU s | simulated/CPU | verdict |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    failed = 0
    for seed in range(args.first, args.first + args.seeds):
        gc.collect()  # the previous seed's world, dead now, freed outside this seed's measure (module docstring)
        started, cpu_started = time.perf_counter(), time.process_time()
        result = run_seed(seed, args.nodes, args.days)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        verdict = "ok" if result.violation is None else f"violation: {result.violation.invariant}"
        failed += result.violation is not None
        print(
            f"| {seed} | {args.nodes} | {args.days:g} | {len(result.schedule)} | {result.steps} | {wall:.1f} | "
            f"{cpu:.1f} | {result.steps / cpu:.0f} | {args.days * 86400 / cpu:.0f}x | {verdict} |",
            flush=True,
        )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
