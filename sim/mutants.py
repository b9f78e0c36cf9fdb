"""Mutation testing of the fleet simulation (issue 12, "Done when"): each known bug put back on purpose, one at a
time, by a small patch of the product's code, then random seeds run until one breaks an invariant.

A mutant is a context manager patching one function of the product (or of the simulated agent's wiring, for the
cordon step the real agent runs on its own thread) and a ``Profile`` that makes the faults it needs common enough
(the schedule is still drawn at random from the seed; only the rates differ from the default profile). The six are
the bugs the issue names:

- ``refresh_no_deadline``: a refresh wait with no deadline (``Context.overdue`` never says overdue);
- ``refused_terminate_given_back``: a terminate Auto Scaling refuses counted as done (the replenisher's
  ``execute._apply`` swallows the ``AwsRequestError`` and goes on with the plan);
- ``cordon_behind_slots``: the cordon made only inside the drain step (no ``steps.cordon_first``), so a drain waiting
  for a slot leaves its node schedulable;
- ``rebalance_cordon_kept``: a rebalance recommendation's cordon never undone (``CordonReleaser.check_once`` does
  nothing);
- ``ledger_ignores_reset``: the compensation ledger ignores kOps resetting the donor's sizes (``reconcile_donors``
  does nothing; the original MaxSize is the recorded one even when Auto Scaling reports less);
- ``lock_not_atomic``: the lease lock's acquire reads, then writes with no condition (another invocation can run
  between the read and the write: the ``concurrent`` fault).

``hunt`` runs seeds until the first violation; ``python -m sim.mutants`` prints, per mutant, the first seed that
finds it, the invariant, and how many seeds it took.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from dataclasses import dataclass, replace
from typing import Any

from sim.invariants import Violation
from sim.schedules import CALM, HOUR, Profile

# Auto Scaling refusing TerminateInstanceInAutoScalingGroup (sim.schedules.API_FAULTS): the refused_terminate mutant's
# only API fault, so a give-back meets it often
TERMINATE_REFUSED = ("autoscaling", "TerminateInstanceInAutoScalingGroup", "ScalingActivityInProgress")

QUIET = CALM  # no fault but those a mutant's profile turns on


@contextmanager
def _patched(owner: Any, name: str, value: Any) -> Iterator[None]:
    old = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, old)


# the six mutants ----------------------------------------------------------------------------------------------------
def refresh_no_deadline() -> AbstractContextManager[None]:
    """A refresh wait with no deadline: the wait's start is recorded, it is never overdue."""
    from lambdas.refresher.decide import context

    real = context.Context.overdue

    def overdue(self: Any, step: Any, wait: Any, what: str) -> bool:
        if wait.value not in step.waiting_since:
            real(self, step, wait, what)  # records the start, as the real one does
        return False

    return _patched(context.Context, "overdue", overdue)


def refused_terminate_given_back() -> AbstractContextManager[None]:
    """A terminate Auto Scaling refuses is counted as done: the plan goes on as if the instance was given back."""
    from core.exceptions import AwsRequestError
    from lambdas.replenisher import execute
    from lambdas.replenisher.plan import Terminate

    real = execute._apply

    def apply(action: Any, effects: Any, now: Any, refused: list[str]) -> str:
        if isinstance(action, Terminate):
            with suppress(AwsRequestError):
                effects.aws.autoscaling.terminate_in_group(action.instance_id, action.decrement)
            return "terminated"
        return real(action, effects, now, refused)

    return _patched(execute, "_apply", apply)


def cordon_behind_slots() -> AbstractContextManager[None]:
    """Cordons queued behind drain slots: no cordon before the slot; the drain step cordons when it starts."""
    import sim.agent_worker

    def no_cordon_first(engine: Any, command: Any, metrics: Any = None) -> None:
        return None

    return _patched(sim.agent_worker, "cordon_first", no_cordon_first)


def rebalance_cordon_kept() -> AbstractContextManager[None]:
    """A rebalance recommendation's cordon is never undone: the agent's cordon releaser does nothing."""
    from agent.cordons.releaser import CordonReleaser

    def check_once(self: Any) -> dict[str, int]:
        return {"released": 0, "kept": 0, "waiting": 0, "errors": 0}

    return _patched(CordonReleaser, "check_once", check_once)


@contextmanager
def ledger_ignores_reset() -> Iterator[None]:
    """The ledger ignores a kOps reset of the donor's sizes: what it carries is never reconciled with the donor's
    actual sizes, and the original MaxSize is the recorded one even when Auto Scaling now reports a smaller one."""
    import lambdas.replenisher.decide as decide
    from lambdas.replenisher.decide.builder import Builder

    def original_max(self: Any, donor: str) -> int:
        records = self.donor_records(donor)
        return min(r.max_before for r in records) if records else int(self.max_size.get(donor, 0))

    def reconcile_donors(b: Any) -> None:
        return None

    with _patched(decide, "reconcile_donors", reconcile_donors), _patched(Builder, "original_max", original_max):
        yield


def lock_not_atomic() -> AbstractContextManager[None]:
    """The lock's acquire reads the item, then writes itself as holder with no condition: two invocations that read
    the same free lock both take it (the second's write lands on the first's lease)."""
    from adapters.dynamo import lock
    from core.lock import Lease, fencing_of, renewable_by

    real = lock.LeaseLock.acquire

    def acquire(
        self: Any,
        holder: str,
        operation: str,
        lease_seconds: float,
        *,
        seen: dict[str, Any] | None = None,
        use_seen: bool = False,
    ) -> Any:
        now = self.clock()
        current = seen if use_seen else self.table.get(lock.LOCK_SK)
        held = renewable_by(current, holder, now)
        if held is not None:
            return self.renew(held, lease_seconds)
        if current is not None and current.get("holder") and float(current.get("lease_expires_at", 0)) > now:
            return real(self, holder, operation, lease_seconds, seen=seen, use_seen=use_seen)  # refused as before
        previous = fencing_of(current)
        expires = now + lease_seconds
        item = {"holder": holder, "operation": operation, "lease_expires_at": expires, "fencing": previous + 1}
        self.table.put(lock.LOCK_SK, {**item, "acquired_at": now})
        return Lease(holder, operation, previous + 1, expires)

    return _patched(lock.LeaseLock, "acquire", acquire)


@dataclass(frozen=True)
class Mutant:
    """A bug put back (``patch``), the profile whose faults it needs, the run's size, and the invariants that
    report it (any violation counts; these are the expected ones)."""

    name: str
    patch: Callable[[], AbstractContextManager[None]]
    profile: Profile
    nodes: int = 12
    days: float = 1.0
    agent: tuple[tuple[str, int], ...] = ()  # the agent's settings overrides (an operator's choice, not the bug)


MUTANTS: dict[str, Mutant] = {
    m.name: m
    for m in (
        Mutant(
            "refresh_no_deadline",
            refresh_no_deadline,
            replace(QUIET, outages=3, operators_per_day=4.0, spot_monthly=0.1),
        ),
        Mutant(
            "refused_terminate_given_back",
            refused_terminate_given_back,
            # give-backs (outages, reclaims) often, and terminate refusals windows often
            replace(
                QUIET,
                outages=4,
                burst_per_day=4.0,
                spot_monthly=1.0,
                api_bursts_per_day=24.0,
                api_faults=(TERMINATE_REFUSED,),
            ),
        ),
        Mutant(
            "cordon_behind_slots",
            cordon_behind_slots,
            replace(QUIET, burst_per_day=6.0, spot_monthly=0.5),
            # at the default 64 drain slots a 12-node cluster never queues a drain: one slot (AGENT_CONCURRENCY=1);
            # and a Spot drain waits for no slot by default (DRAIN_URGENT_SECONDS): the supported setting 0 makes
            # the profile's Spot drains queue, as every drain did before
            agent=(("concurrency", 1), ("max_in_flight", 2), ("drain_urgent_seconds", 0)),
        ),
        Mutant(
            "rebalance_cordon_kept",
            rebalance_cordon_kept,
            replace(QUIET, rebalance_per_day=4.0, rebalance_followed=0.3),
        ),
        Mutant(
            "ledger_ignores_reset",
            ledger_ignores_reset,
            # a reset must meet a compensation: reclaims in an AZ while it has no capacity, kOps resets often
            replace(QUIET, outages=4, burst_per_day=4.0, kops_resets_per_day=6.0, spot_monthly=1.0),
        ),
        Mutant(
            "lock_not_atomic",
            lock_not_atomic,
            # the race needs two invocations that both take the lock, one between the other's read and write:
            # compensations (outages, reclaims) and refresh runs (operators) often, concurrent windows often, and
            # only between the two lock takers (the interruption Lambda takes no lock), at the port calls around
            # the acquire (both read the lock in their first calls and write it about the fifth): a window
            # elsewhere cannot race
            replace(
                QUIET,
                outages=6,
                burst_per_day=4.0,
                concurrent_per_day=24.0,
                concurrent_calls=(2, 5),
                functions=("replenisher", "refresher"),
                spot_monthly=1.0,
                operators_per_day=6.0,
            ),
        ),
    )
}


@contextmanager
def agent_overrides(overrides: dict[str, int]) -> Iterator[None]:
    """The worlds built meanwhile run their agent with ``overrides`` of its settings."""
    import sim.world

    if not overrides:
        yield
        return
    real = sim.world.agent_settings

    def settings(**more: Any) -> Any:
        return real(**{**overrides, **more})

    with _patched(sim.world, "agent_settings", settings):
        yield


@contextmanager
def applied(name: str, patch: bool = True) -> Iterator[None]:
    """While inside: the worlds built run with mutant ``name``'s agent overrides and (``patch``) its bug put back."""
    mutant = MUTANTS[name]
    with agent_overrides(dict(mutant.agent)), mutant.patch() if patch else nullcontext():
        yield


@dataclass(frozen=True)
class Found:
    """A hunt's result: the first seed that broke an invariant (None: none of ``seeds`` did) and its violation."""

    mutant: str
    seed: int | None
    seeds_run: int
    violation: Violation | None
    cpu_seconds: float


def hunt(name: str, seeds: range, nodes: int | None = None, days: float | None = None, control: bool = False) -> Found:
    """Run ``seeds`` with mutant ``name`` applied until one breaks an invariant (``control``: the same seeds and
    profile without the patch, which must find nothing)."""
    from sim.run import run_seed

    mutant = MUTANTS[name]
    started = time.process_time()
    ran = 0
    with applied(name, patch=not control):
        for seed in seeds:
            ran += 1
            result = run_seed(seed, nodes or mutant.nodes, days or mutant.days, profile=mutant.profile)
            if result.violation is not None:
                return Found(name, seed, ran, result.violation, time.process_time() - started)
    return Found(name, None, ran, None, time.process_time() - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sim.mutants", description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help=f"mutants (default all: {', '.join(MUTANTS)})")
    parser.add_argument("--seeds", type=int, default=300, help="at most this many seeds per mutant")
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--nodes", type=int, default=None)
    parser.add_argument("--days", type=float, default=None)
    parser.add_argument("--control", action="store_true", help="run without the patches: nothing may be found")
    args = parser.parse_args(argv)
    missed = 0
    for name in args.names or list(MUTANTS):
        found = hunt(name, range(args.first, args.first + args.seeds), args.nodes, args.days, args.control)
        if args.control:
            missed += found.violation is not None
            print(f"{name} control: {found.seeds_run} seeds, {found.violation or 'nothing found'}", flush=True)
        elif found.violation is None:
            missed += 1
            print(f"{name}: NOT FOUND in {found.seeds_run} seeds ({found.cpu_seconds:.0f} s CPU)", flush=True)
        else:
            print(
                f"{name}: found by seed {found.seed} after {found.seeds_run} seeds ({found.cpu_seconds:.0f} s CPU): "
                f"{found.violation}",
                flush=True,
            )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["HOUR", "MUTANTS", "Found", "Mutant", "applied", "hunt"]
