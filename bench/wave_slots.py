"""Benchmark of a wave of Spot warnings larger than the agent's drain slots, on the fleet simulation (not a test;
results go to BENCHMARKS.md): the same seeded world and wave with every drain waiting for one of
``AGENT_CONCURRENCY`` slots (``DRAIN_URGENT_SECONDS=0``, as before the setting) and with the default (a drain whose
instance ends within that many seconds starts at once, ``agent.consumer.schedule.urgent_drain``).

The wave: ``--wave`` warnings, half in each of two AZs, spread over 30 s, one simulated hour in; the run goes on for
``--hours`` (the reclaims, the replacements). The simulation's pods: Deployments spread over the workers (30 s grace
period, the API default), one in ten with 300 s, a DaemonSet, PodDisruptionBudgets (``sim.world``). A drain caps each
pod's grace so it ends ``DRAIN_GRACE_MARGIN_SECONDS`` (10 s) before the deadline, so a drain that starts late does
not lose pods to the reclaim: it cuts their graceful shutdown short instead.

Reported per setting, from the Spot drains' ``CMD#`` items and the simulated cluster: the longest a drain waited from
its start (cordoned) to its evictions, the drains that began evicting with less than 40 s before their deadline (a
30 s grace no longer fits: their pods got less), pods killed by a reclaim (running when their instance went), pods
stopped by an eviction or a delete, and the verdict of every invariant.

Usage: ``python -m bench.wave_slots --nodes 300 --wave 180 --slots 16``; ``--smoke`` is 30 nodes, a wave of 16 and
2 slots (numbers not judged). ``--in-flight 256,1024`` compares those bounds on the commands the agent holds
(``AGENT_MAX_IN_FLIGHT``) instead, with the default urgent setting and ``--slots`` (default 64 then: the agent's own).
"""

from __future__ import annotations

import argparse
import time
from datetime import datetime
from typing import Any

from sim.mutants import agent_overrides
from sim.run import run_seed
from sim.schedules import Fault
from sim.world import World

AZS = ("us-east-1a", "us-east-1b")
FITS_SECONDS = 40.0  # the default 30 s grace plus the 10 s margin


def wave(count: int, at: float = 3600.0) -> tuple[Fault, ...]:
    """``count`` Spot warnings over 30 s at simulated second ``at``, split between two AZs."""
    half = count // 2
    return tuple(
        Fault(at, "spot_burst", 30.0, (("az", az), ("count", n)))
        for az, n in zip(AZS, (count - half, half), strict=True)
    )


def drain_starts(items: list[dict[str, Any]]) -> tuple[float, int]:
    """The longest wait from a Spot drain's start to its evictions (seconds) and how many began with less than
    ``FITS_SECONDS`` left, from the ``CMD#`` items' results (``durations.total`` is the evicting part)."""
    longest, late = 0.0, 0
    for item in items:
        result = item.get("result")
        if not str(item.get("sk", "")).startswith("CMD#spot") or not isinstance(result, dict):
            continue
        command = item.get("command") or {}
        try:
            started = datetime.fromisoformat(str(item.get("started_at")))
            finished = datetime.fromisoformat(str(result.get("finished_at")))
            deadline = datetime.fromisoformat(str(command.get("deadline")))
        except ValueError:
            continue
        evicting = float((result.get("durations") or {}).get("total", 0.0))
        began = (finished - started).total_seconds() - evicting
        longest = max(longest, began)
        late += (deadline - finished).total_seconds() + evicting < FITS_SECONDS
    return longest, late


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=300)
    parser.add_argument("--wave", type=int, default=180)
    parser.add_argument("--slots", type=int, default=None, help="AGENT_CONCURRENCY (default 16; 64 with --in-flight)")
    parser.add_argument("--hours", type=float, default=2.4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--in-flight", default="", help="comma-separated AGENT_MAX_IN_FLIGHT values to compare")
    args = parser.parse_args(argv)
    if args.smoke:
        args.nodes, args.wave, args.slots, args.hours = 30, 16, 2, 1.2
    bounds = [int(n) for n in args.in_flight.split(",") if n]
    if args.slots is None:
        args.slots = 64 if bounds else 16
    first = "AGENT_MAX_IN_FLIGHT" if bounds else "DRAIN_URGENT_SECONDS"
    print(
        f"| {first} | nodes | wave | slots | longest wait to evict, s | drains begun with < 40 s left | "
        "pods killed by the reclaim | stopped by eviction | stopped by delete | CPU s | verdict |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    failed = 0
    settings = [{"max_in_flight": n} for n in bounds] or [{"drain_urgent_seconds": u} for u in (0, 300)]
    for setting in settings:
        cpu = time.process_time()
        worlds: list[World] = []
        with agent_overrides({**setting, "concurrency": args.slots}):
            result = run_seed(args.seed, args.nodes, args.hours / 24, schedule=wave(args.wave), mutate=worlds.append)
        longest, late = drain_starts(list(worlds[0].view.table_items()))
        c = result.counters
        verdict = "ok" if result.violation is None else f"violation: {result.violation.invariant}"
        failed += result.violation is not None
        print(
            f"| {next(iter(setting.values()))} | {args.nodes} | {args.wave} | {args.slots} | {longest:.0f} | {late} | "
            f"{c['killed_by_reclaim']:g} | {c['stopped_by_eviction']:g} | {c['stopped_by_delete']:g} | "
            f"{time.process_time() - cpu:.1f} | {verdict} |",
            flush=True,
        )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
