"""Where one seed of the fleet simulation spends its CPU, per kind of simulated step (issue 12, "Speed").

Runs ``sim.run.run_seed`` with every scheduled action timed (``time.process_time`` around it) and prints, per kind
of step, the CPU seconds, the share of the run, the count and the mean per step. A step's kind is its kernel label
with ids and numbers folded (``deliver refresher Node Ready``, ``agent:agent:membership``, ``kube:schedule``): a
Lambda delivery holds that invocation's whole ``handle()`` and the simulated services it called, an agent step the
agent's code and its calls. The invariant checker and the kernel's own loop run between actions, outside every kind
(the line "between actions").

The timing wraps each action in a closure (``sim.kernel.Timer`` is patched for the run only), about a microsecond a
step: the shares are the figure to read, not the absolute seconds (``bench.sim_speed`` measures those).

Usage: ``python -m bench.sim_census --seed 1 --nodes 300 --days 7 [--top 25]``.
"""

from __future__ import annotations

import argparse
import re
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import sim.kernel
from sim.run import run_seed

# ids (instance ids, event ids, hex run ids) and numbers folded out of a label
FOLD = re.compile(r"[-_0-9a-f]{6,}|\d+")


@contextmanager
def timed_actions(cost: defaultdict[str, float], count: Counter[str]) -> Iterator[None]:
    """Every action scheduled inside the block adds its CPU seconds to ``cost`` and one to ``count`` under its kind."""
    init = sim.kernel.Timer.__init__

    def timed(self: sim.kernel.Timer, at: float, seq: int, label: str, action: Callable[[], None]) -> None:
        kind = FOLD.sub("#", label)

        def run() -> None:
            started = time.process_time()
            try:
                action()
            finally:
                cost[kind] += time.process_time() - started
                count[kind] += 1

        init(self, at, seq, label, run)

    sim.kernel.Timer.__init__ = timed  # type: ignore[method-assign]
    try:
        yield
    finally:
        sim.kernel.Timer.__init__ = init  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--nodes", type=int, default=300)
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    cost: defaultdict[str, float] = defaultdict(float)
    count: Counter[str] = Counter()
    started = time.process_time()
    with timed_actions(cost, count):
        result = run_seed(args.seed, args.nodes, args.days)
    total = time.process_time() - started
    verdict = "ok" if result.violation is None else f"violation: {result.violation.invariant}"
    shape = f"{args.nodes} nodes x {args.days:g} days"
    print(f"seed {args.seed}, {shape}: {result.steps} steps, {total:.2f} CPU s, {verdict}")
    print("| kind of step | CPU s | share | steps | us a step |")
    print("|---|---:|---:|---:|---:|")
    ranked = sorted(cost.items(), key=lambda kv: -kv[1])
    for kind, seconds in ranked[: args.top]:
        print(f"| {kind} | {seconds:.2f} | {seconds / total:.0%} | {count[kind]} | {seconds / count[kind] * 1e6:.0f} |")
    rest = sum(seconds for _, seconds in ranked[args.top :])
    print(f"| the other {max(0, len(cost) - args.top)} kinds | {rest:.2f} | {rest / total:.0%} | | |")
    between = total - sum(cost.values())
    print(f"| between actions (checker, kernel, world build, end checks) | {between:.2f} | {between / total:.0%} | | |")
    return 1 if result.violation is not None else 0


if __name__ == "__main__":
    raise SystemExit(main())
