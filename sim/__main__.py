"""``python -m sim``: run seeds of the fleet simulation, or replay one (issue 12).

    python -m sim run --seeds 20 --nodes 300 --days 7 [--first 0] [--masters 3] [--no-shrink | --shrink-runs 60]
        [--jobs 2]
    python -m sim replay SEED [--nodes 300 --days 7] [--trace]
    ... [--profile NAME] [--mutant NAME]

``run`` prints one summary per seed and, for a seed that breaks an invariant, the shortest schedule that still
breaks it and the command that replays it; it exits 1 when any seed did. ``replay`` runs one seed again (bit for bit
the same run) and prints its schedule, its summary and, with ``--trace``, every step and invocation. Both judge every
invariant the tests judge: ``sim.invariants`` and ``sim.watch`` (``sim.run.run_seed``).

``--jobs N`` runs N seeds at a time, each in its own process (forked, so a ``--mutant``'s patch is in every one);
each seed's run is the same as alone (one seed, one run) and the summaries are printed in seed order. On the 2-core
machine ``--jobs 2`` runs a soak in about half the wall time.

``--profile NAME`` draws the schedule with mutant NAME's fault profile (``sim.mutants.MUTANTS``; ``default``: the
default profile; ``storm``: every fault four times as often, ``sim.schedules.STORM``); ``--mutant NAME`` also puts
that mutant's bug back (and its agent settings), as ``python -m sim.mutants`` does, so a seed the hunt reports can be
replayed and traced.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
from collections.abc import Iterator
from contextlib import nullcontext
from functools import partial

from sim.mutants import MUTANTS, applied
from sim.run import run_seed, shrink_seed
from sim.schedules import PROFILES, Profile


def _options(args: argparse.Namespace) -> str:
    """The options that make a run the same run again (for the replay command)."""
    out = f"--nodes {args.nodes} --days {args.days:g}"
    if args.masters != 3:
        out += f" --masters {args.masters}"
    if args.profile:
        out += f" --profile {args.profile}"
    if args.mutant:
        out += f" --mutant {args.mutant}"
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sim", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run seeds and check the invariants")
    run.add_argument("--seeds", type=int, default=10)
    run.add_argument("--first", type=int, default=0, help="the first seed")
    replay = sub.add_parser("replay", help="run one seed again")
    replay.add_argument("seed", type=int)
    replay.add_argument("--trace", action="store_true", help="print every step and invocation")
    for p in (run, replay):
        p.add_argument("--nodes", type=int, default=30)
        p.add_argument("--days", type=float, default=1.0)
        p.add_argument("--masters", type=int, choices=(1, 3), default=3)
        p.add_argument("--profile", choices=["default", *PROFILES, *MUTANTS], default=None, help="the fault profile")
        p.add_argument("--mutant", choices=list(MUTANTS), default=None, help="put this mutant's bug back")
    run.add_argument("--no-shrink", action="store_true", help="do not shrink a failing schedule")
    run.add_argument("--shrink-runs", type=int, default=60, help="at most this many runs to shrink one schedule")
    run.add_argument("--jobs", type=int, default=1, help="seeds run at a time, each in its own process")
    args = parser.parse_args(argv)
    named = args.profile or args.mutant
    profile: Profile | None = (
        PROFILES[named] if named in PROFILES else MUTANTS[named].profile if named and named != "default" else None
    )

    with applied(args.mutant) if args.mutant else nullcontext():
        if args.command == "replay":
            result = run_seed(args.seed, args.nodes, args.days, masters=args.masters, trace=args.trace, profile=profile)
            print("schedule:")
            for fault in result.schedule:
                print(f"  {fault.describe()}")
            for line in result.trace:
                print(line)
            print(result.summary())
            return 1 if result.failed else 0

        seeds = range(args.first, args.first + args.seeds)
        failed = 0
        for lines, broke in _results(args, profile, seeds):
            print("\n".join(lines), flush=True)
            failed += broke
    print(f"{args.seeds - failed} of {args.seeds} seeds held every invariant")
    return 1 if failed else 0


def _seed(args: argparse.Namespace, profile: Profile | None, seed: int) -> tuple[list[str], bool]:
    """Run one seed (and shrink it when it fails): the lines to print, and whether it broke an invariant."""
    result = run_seed(seed, args.nodes, args.days, masters=args.masters, profile=profile)
    lines = [result.summary()]
    if result.failed:
        if not args.no_shrink:
            shortest = shrink_seed(seed, result, runs=args.shrink_runs, masters=args.masters)
            lines.append(f"  shortest failing schedule ({len(shortest)} of {len(result.schedule)} entries):")
            lines.extend(f"    {fault.describe()}" for fault in shortest)
        lines.append(f"  replay: python -m sim replay {seed} {_options(args)} --trace")
    return lines, result.failed


def _results(args: argparse.Namespace, profile: Profile | None, seeds: range) -> Iterator[tuple[list[str], bool]]:
    """``_seed`` of each seed in order; with ``args.jobs`` > 1 run by that many forked processes (``imap`` keeps
    the order: a seed's lines are printed once every earlier seed's are)."""
    if args.jobs <= 1:
        yield from (_seed(args, profile, seed) for seed in seeds)
        return
    with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
        yield from pool.imap(partial(_seed, args, profile), seeds)


if __name__ == "__main__":
    sys.exit(main())
