"""The checker and the watch are shown only the steps they ask for (``Checker.after_step`` answers when its next check
is due, ``Kernel.run``): the same checks run at the same instants as when they see every step."""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

from sim.invariants import Checker
from sim.kernel import Kernel, Step
from sim.schedules import DAY
from sim.watch import Watch, install
from sim.world import Shape, World


def _checked(every_step: bool) -> tuple[str, float, list[float], list[float]]:
    world = World.build(11, Shape(nodes=12))
    watch = install(world)
    scans: list[float] = []
    cordons: list[float] = []
    scan, look = world.checker.scan, watch.cordons

    def scanned() -> None:
        scans.append(world.kernel.t)
        scan()

    def looked() -> None:
        cordons.append(world.kernel.t)
        look()

    world.checker.scan = scanned  # type: ignore[method-assign]
    watch.cordons = looked  # type: ignore[method-assign]
    world.run(0.3 * DAY, (lambda step: None) if every_step else None)  # a hook of the caller's: every step
    world.trace.add(repr(sorted(map(repr, world.view.table_items()))))
    return world.trace.digest.hexdigest(), world.checker.checks, scans, cordons


def test_the_checks_run_at_the_same_instants_whether_or_not_every_step_is_shown() -> None:
    every = _checked(every_step=True)
    due = _checked(every_step=False)
    assert every == due
    assert len(every[2]) > 100 and len(every[3]) > 1000  # a scan a minute, a look at the drains every 5 s


def test_a_hook_of_the_caller_sees_every_step() -> None:
    seen: list[Step] = []
    world = World.build(4, Shape(nodes=12))
    install(world)
    world.run(0.01 * DAY, seen.append)
    assert len(seen) == world.kernel.steps > 0


def _hook_calls(times: list[float], hook_of: Any, every_step: bool) -> list[tuple[str, float]]:
    """What a fresh checker and watch check (scans, cordon looks, waits) over steps at ``times``."""
    checker = Checker(view=None, seed=0)  # type: ignore[arg-type]  # scan is replaced: the view is never read
    world = SimpleNamespace(checker=checker)
    watch = Watch(world)  # type: ignore[arg-type]  # the checker is all its after_step reads of the world
    done: list[tuple[str, float]] = []
    checker.scan = lambda: done.append(("scan", checker.t))  # type: ignore[method-assign]
    watch.cordons = lambda: done.append(("cordons", checker.t))  # type: ignore[method-assign]
    watch.waits = lambda: done.append(("waits", checker.t))  # type: ignore[method-assign]
    kernel = Kernel(0)
    for at in times:
        kernel.at(at, "step", lambda: None)
    hook = hook_of(checker, watch)
    kernel.run(times[-1], (lambda step: (hook(step), None)[1]) if every_step else hook)
    return done


def test_the_checks_fall_on_the_same_steps_at_any_times() -> None:
    rng = random.Random(5)
    times, t = [], 0.0
    for _ in range(20000):  # sums of tenths and of random gaps: the float rounding of last + period included
        t += rng.choice([0.1, 0.2, 0.3, 1.7, rng.random() * 3, 5.0, 60.0 - 0.1 * rng.randrange(3)])
        times.append(t)

    def hook_of(checker: Checker, watch: Watch) -> Any:
        def after_step(step: Step) -> float | None:
            due = checker.after_step(step)
            assert due is not None
            return min(due, watch.after_step(step))

        return after_step

    every = _hook_calls(times, hook_of, every_step=True)
    assert every == _hook_calls(times, hook_of, every_step=False)
    assert len(every) > 3000
