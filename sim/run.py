"""Running seeds: one seeded world under one schedule, the invariants after every step, a summary; replaying a seed;
shrinking a failing schedule to the shortest that still fails (issue 12).

Shrinking (``sim.shrink``) keeps the seed, so the world's own draws stay the same.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from sim.eventbridge import Delivery
from sim.health import nodeless_left
from sim.invariants import Violation
from sim.schedules import DAY, Fault, Profile, generate
from sim.shrink import shrink
from sim.watch import install as install_watch
from sim.world import Shape, World


@dataclass
class Result:
    """One seed's run: the schedule it ran, the first violation (None when every check held), the trace digest,
    and what happened (steps, invocations by outcome, events, pods killed by reclaims vs stopped by evictions)."""

    seed: int
    nodes: int
    days: float
    schedule: tuple[Fault, ...]
    violation: Violation | None
    digest: str
    steps: int
    outcomes: dict[str, int] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    trace: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.violation is not None

    def summary(self) -> str:
        head = (
            f"seed {self.seed}: {self.nodes} nodes, {self.days:g} days, {len(self.schedule)} faults, {self.steps} steps"
        )
        outcomes = " ".join(f"{k}={v}" for k, v in sorted(self.outcomes.items()))
        counters = " ".join(f"{k}={v:g}" for k, v in sorted(self.counters.items()))
        verdict = f"VIOLATION {self.violation}" if self.violation else "ok"
        return f"{head}\n  invocations: {outcomes}\n  {counters}\n  digest {self.digest[:16]}  {verdict}"


# collections of the middle generation between two of the oldest, during a seed's build, run, end checks and digest
# (CPython's: 10; see ``full_collections_rarer``)
FULL_COLLECTION_THRESHOLD = 100


@contextmanager
def full_collections_rarer(threshold: int = FULL_COLLECTION_THRESHOLD) -> Iterator[None]:
    """CPython's cyclic garbage collector with its oldest generation collected after ``threshold`` collections of the
    middle one, not CPython's 10, while the block runs; its thresholds as they were after. A simulated world is mostly
    long-lived objects (the tables' items, the cluster's nodes and pods, the memos of warm execution environments),
    and every full collection walks them all: at 1,000 nodes for 7 days, 14 full collections took 1.3 of 34 CPU s
    (``gc.callbacks``), 2 took 0.3 s with this, for about 4 % more memory (169 -> 176 MB peak). The young generations
    are collected as before. Nothing the simulation does depends on when garbage is collected (the digest is the same
    either way)."""
    before = gc.get_threshold()
    gc.set_threshold(before[0], before[1], threshold)
    try:
        yield
    finally:
        gc.set_threshold(*before)


def run_seed(
    seed: int,
    nodes: int = 30,
    days: float = 1.0,
    *,
    schedule: tuple[Fault, ...] | None = None,
    profile: Profile | None = None,
    masters: int = 3,
    delivery: Delivery | None = None,
    trace: bool = False,
    mutate: Callable[[World], None] | None = None,
    watch: bool = True,
) -> Result:
    """Build the world for ``seed``, apply ``schedule`` (default: drawn from the seed's ``schedule`` stream with
    ``profile``), run ``days`` simulated days, and check the end state.

    Args:
        mutate: changes the built world before it runs (a test's deliberately broken part).
        watch: also judge the invariants ``sim.watch`` checks as they happen (the lock's exclusion, a drained node
            cordoned at once, refresh waits and compensations ending by their bounds); every caller (``python -m
            sim run`` and ``replay``, the shrinker, the mutation hunt, the tests) judges the same invariants unless
            it turns them off.
    """
    # the whole run, its end checks and its digest (a full collection right after the run, over a world of long-lived
    # objects, took 0.1-0.2 CPU s of a 300-node week when the digest line ran outside the block)
    with full_collections_rarer():
        world = World.build(seed, Shape(nodes=nodes, masters=masters), delivery, trace)
        if watch:
            install_watch(world)
        if mutate is not None:
            mutate(world)
        if schedule is None:
            schedule = generate(world.kernel.stream("schedule"), nodes, days, profile)
        world.apply(schedule)
        violation: Violation | None = None
        try:
            world.run(days * DAY)
            world.checker.t = world.kernel.t
            world.checker.finish()
            nodeless_left(world)
        except Violation as found:
            violation = found
        world.trace.add(f"end {world.kernel.t:.3f} {violation}")
        # the table's end state is part of the digest: a wall-clock time leaking into an item changes it run to run
        world.trace.add(repr(sorted((str(i.get("sk")), repr(sorted(i.items()))) for i in world.view.table_items())))
    counters = {
        "events": float(world.bus.stats.put),
        "retried": float(world.bus.stats.retried),
        "dropped": float(world.bus.stats.dropped),
        "killed_by_reclaim": float(world.kube.counters.killed_by_reclaim),
        "stopped_by_eviction": float(world.kube.counters.stopped_by_eviction),
        "stopped_by_delete": float(world.kube.counters.stopped_by_delete),
        "cut_short": float(world.kube.counters.cut_short),
        "checks": float(world.checker.checks),
    }
    return Result(
        seed=seed,
        nodes=nodes,
        days=days,
        schedule=schedule,
        violation=violation,
        digest=world.trace.digest.hexdigest(),
        steps=world.kernel.steps,
        outcomes=dict(world.lambdas.outcomes),
        counters=counters,
        trace=list(world.trace.lines),
    )


def shrink_seed(seed: int, result: Result, runs: int = 60, **options: object) -> tuple[Fault, ...]:
    """``shrink`` for a failed ``run_seed`` result (the same nodes, days and options), in at most ``runs`` runs."""

    def fails(schedule: tuple[Fault, ...]) -> str | None:
        found = run_seed(seed, result.nodes, result.days, schedule=schedule, **options)  # type: ignore[arg-type]  # the caller's run_seed options
        return found.violation.invariant if found.violation else None

    return shrink(seed, result.schedule, fails, budget=runs)
