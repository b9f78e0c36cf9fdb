"""sim.run: one seed is one exact run (same trace digest); the invariant checker catches a deliberately broken world
through the real wiring (an effect made through the Lambdas' ports); a few small seeds hold every invariant."""

from __future__ import annotations

import contextlib
import gc

import pytest

import sim.run
import sim.view
from agent.cordons.releaser import CordonReleaser
from sim.run import FULL_COLLECTION_THRESHOLD, full_collections_rarer, run_seed
from sim.schedules import CALM, STORM, Fault
from sim.world import World


def test_same_seed_same_run() -> None:
    first = run_seed(3, nodes=12, days=0.5)
    again = run_seed(3, nodes=12, days=0.5)
    assert first.digest == again.digest
    assert first.schedule == again.schedule
    assert first.steps == again.steps
    assert run_seed(4, nodes=12, days=0.5).digest != first.digest


def test_a_run_collects_the_oldest_generation_rarer_and_gives_the_collector_back_as_it_was(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The digest is the same whatever the collector's thresholds (nothing depends on when garbage is collected);
    the thresholds a run sets last as long as the run."""
    seen: list[tuple[int, int, int]] = []

    def look(world: World) -> None:
        world.kernel.at(60.0, "test:look", lambda: seen.append(gc.get_threshold()))

    before = gc.get_threshold()
    rarer = run_seed(3, nodes=12, days=0.25, mutate=look)
    assert seen == [(before[0], before[1], FULL_COLLECTION_THRESHOLD)] and gc.get_threshold() == before

    monkeypatch.setattr(sim.run, "full_collections_rarer", contextlib.nullcontext)  # CPython's own thresholds
    default = run_seed(3, nodes=12, days=0.25, mutate=look)
    assert seen[1] == before and default.digest == rarer.digest
    with full_collections_rarer(7):
        assert gc.get_threshold() == (before[0], before[1], 7)
    assert gc.get_threshold() == before


def test_the_end_checks_and_the_digest_run_with_the_rarer_collections(monkeypatch: pytest.MonkeyPatch) -> None:
    """The digest's read of every item (a few MB of text at 300 nodes) runs inside the block: with CPython's thresholds
    back, it set off a full collection over the whole live world (0.1-0.2 CPU s of a 300-node week)."""
    seen: list[tuple[int, int, int]] = []
    table_items = sim.view.View.table_items

    def look(self: sim.view.View) -> list[dict[str, object]]:
        seen.append(gc.get_threshold())
        return table_items(self)

    monkeypatch.setattr(sim.view.View, "table_items", look)
    before = gc.get_threshold()
    run_seed(3, nodes=6, days=0.05)
    assert seen and all(t == (before[0], before[1], FULL_COLLECTION_THRESHOLD) for t in seen)
    assert gc.get_threshold() == before


def test_a_refresh_run_is_the_same_run_again() -> None:
    """A manual refresh starts a run under the lock: its run id and its invocation's lock holder name come from the
    seed, not from ``secrets`` (``core.runs.new_run_id``, ``new_invocation_id``)."""
    schedule = (Fault(600.0, "manual_refresh", params=(("az", "us-east-1a"),)),)
    first = run_seed(5, nodes=9, days=0.1, schedule=schedule, trace=True)
    again = run_seed(5, nodes=9, days=0.1, schedule=schedule, trace=True)
    assert any("refresher:" in line for line in first.trace)  # the run took the lock under its holder name
    assert first.trace == again.trace
    assert first.digest == again.digest


def _at(t: float, action: object) -> object:
    def mutate(world: World) -> None:
        world.kernel.at(t, "broken", lambda: action(world))  # type: ignore[operator]  # the test's action

    return mutate


def test_a_termination_before_any_drain_is_caught() -> None:
    def terminate(world: World) -> None:
        victim = sorted(i for i, (g, _) in world.view.running_instances().items() if g and g.startswith("nodes-"))[0]
        world.lambdas.wire.function = "broken"
        world.lambdas.interruption.aws.autoscaling.terminate_in_group(victim, False)

    result = run_seed(1, nodes=9, days=0.1, profile=CALM, mutate=_at(600.0, terminate))  # type: ignore[arg-type]
    assert result.violation is not None
    assert result.violation.invariant == "3 no termination before drain"
    assert result.violation.at == 600.0 and result.violation.seed == 1


def test_an_unrecorded_capacity_increase_is_caught() -> None:
    def raise_group(world: World) -> None:
        world.lambdas.wire.function = "broken"
        world.lambdas.replenisher.aws.autoscaling.set_capacity("nodes-us-east-1b", 4, 4)

    result = run_seed(2, nodes=9, days=0.1, profile=CALM, mutate=_at(300.0, raise_group))  # type: ignore[arg-type]
    assert result.violation is not None
    assert result.violation.invariant == "4 every capacity increase recorded before it is made"


def test_sizes_not_given_back_are_caught_at_the_end() -> None:
    def kops(world: World) -> None:
        world.aws.kops_reset("nodes-us-east-1c", 3, 5, 5)

    result = run_seed(2, nodes=9, days=0.1, profile=CALM, mutate=_at(300.0, kops))  # type: ignore[arg-type]
    assert result.violation is not None
    assert result.violation.invariant == "4 sizes end where they were"


def test_bad_input_acting_is_caught() -> None:
    schedule = (Fault(100.0, "bad_event", params=(("variant", "foreign_account"),)),)

    def act_on_bad_input(world: World) -> None:
        original = world.lambdas.invoke

        def invoke(function: str, event: dict[str, object], *args: object) -> object:
            if world.checker.bad_input:
                world.lambdas.wire.check("ec2.terminate", (["i-0"],), {})
            return original(function, event, *args)  # type: ignore[arg-type]  # passed through as received

        world.lambdas.invoke = invoke  # type: ignore[method-assign,assignment]  # the broken Lambda

    result = run_seed(2, nodes=9, days=0.1, schedule=schedule, mutate=act_on_bad_input)
    assert result.violation is not None
    assert result.violation.invariant == "7 bad input changes nothing"


@pytest.mark.parametrize("seed", [11, 12])
def test_small_seeds_hold(seed: int) -> None:
    result = run_seed(seed, nodes=9, days=0.5)
    assert result.schedule, "the seed's schedule has faults"
    assert result.violation is None, result.summary()


@pytest.mark.parametrize("seed", [13, 14])
def test_small_storm_seeds_hold(seed: int) -> None:
    """Every fault four times as often (``sim.schedules.STORM``): the combinations a default day rarely draws."""
    result = run_seed(seed, nodes=9, days=1, profile=STORM)
    assert len(result.schedule) > 20, result.summary()
    assert result.violation is None, result.summary()


def test_cli_runs_and_replays(capsys: pytest.CaptureFixture[str]) -> None:
    from sim.__main__ import main

    assert main(["run", "--seeds", "1", "--first", "11", "--nodes", "9", "--days", "0.3"]) == 0
    out = capsys.readouterr().out
    assert "seed 11: 9 nodes" in out and "1 of 1 seeds held every invariant" in out
    assert main(["replay", "11", "--nodes", "9", "--days", "0.3"]) == 0
    replayed = capsys.readouterr().out
    digest = next(line for line in out.splitlines() if "digest" in line).split()[1]
    assert digest in replayed


def test_a_rebalance_cordon_never_undone_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mutation of issue 12's "Done when": the cordon releaser does nothing, so a rebalance cordon whose
    interruption never came stays; the liveness bound on our cordons reports it."""
    schedule = (Fault(600.0, "rebalance", params=(("az", "us-east-1a"), ("follow", 0))),)

    held = run_seed(5, nodes=9, days=0.3, schedule=schedule)
    assert held.violation is None, held.summary()
    monkeypatch.setattr(CordonReleaser, "check_once", lambda self: {})  # the mutation
    broken = run_seed(5, nodes=9, days=0.3, schedule=schedule)
    assert broken.violation is not None
    assert broken.violation.invariant == "8 a cordon of ours is resolved within a bound"


def test_shrinking_a_failing_run_drops_the_entries_it_does_not_need() -> None:
    from sim.run import shrink_seed

    def terminate(world: World) -> None:
        victim = sorted(i for i, (g, _) in world.view.running_instances().items() if g and g.startswith("nodes-"))[0]
        world.lambdas.wire.function = "broken"
        world.lambdas.interruption.aws.autoscaling.terminate_in_group(victim, False)

    noise = (
        Fault(100.0, "bad_event", params=(("variant", "malformed"),)),
        Fault(200.0, "agent_restart", params=(("leader", 0),)),
        Fault(
            300.0, "api", 60.0, (("code", "Throttling"), ("operation", ""), ("probability", 1.0), ("service", "ec2"))
        ),
    )
    mutate = _at(900.0, terminate)
    result = run_seed(1, nodes=9, days=0.1, schedule=noise, mutate=mutate)  # type: ignore[arg-type]
    assert result.violation is not None
    assert shrink_seed(1, result, runs=20, mutate=mutate) == ()


def test_same_seed_same_digest_across_processes_and_hash_seeds() -> None:
    """String hashing differs per process (PYTHONHASHSEED): nothing of the run may depend on it."""
    import os
    import subprocess
    import sys

    digests = set()
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run(
            [sys.executable, "-m", "sim", "run", "--seeds", "1", "--first", "3", "--nodes", "6", "--days", "0.3"],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        ).stdout
        digests.add(next(line.split()[1] for line in out.splitlines() if "digest" in line))
    assert len(digests) == 1


def test_a_violation_only_the_watch_sees_is_reported_by_the_cli_with_its_seed_and_replay(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``python -m sim run`` judges ``sim.watch``'s invariants too: the cordon_behind_slots mutant (a drained node
    left schedulable while its drain waits for a slot, invariant 5 as ``sim.watch`` checks it) is reported with the
    seed and the command that replays it, and that command breaks the same invariant again."""
    from sim.__main__ import main

    options = ["--nodes", "12", "--days", "0.5", "--mutant", "cordon_behind_slots"]
    assert main(["run", "--seeds", "1", "--first", "3", "--no-shrink", *options]) == 1
    out = capsys.readouterr().out
    assert "VIOLATION seed 3: 5 a drained node is cordoned at once" in out, out
    replay = "python -m sim replay 3 --nodes 12 --days 0.5 --mutant cordon_behind_slots --trace"
    assert f"replay: {replay}" in out
    assert "0 of 1 seeds held every invariant" in out
    assert main(replay.split()[3:]) == 1
    assert "VIOLATION seed 3: 5 a drained node is cordoned at once" in capsys.readouterr().out


def test_jobs_run_the_same_seeds_in_order_and_a_mutant_s_patch_reaches_every_process(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--jobs 2`` prints each seed's summary (digest included) as one process at a time does, in seed order, and
    a ``--mutant``'s patch is in the forked processes (the seed that breaks it alone breaks it there)."""
    from sim.__main__ import main

    options = ["run", "--seeds", "2", "--first", "11", "--nodes", "9", "--days", "0.3", "--no-shrink"]
    assert main(options) == 0
    alone = capsys.readouterr().out
    assert main([*options, "--jobs", "2"]) == 0
    assert capsys.readouterr().out == alone
    mutant = ["run", "--seeds", "2", "--first", "2", "--nodes", "12", "--days", "0.5", "--no-shrink"]
    mutant += ["--mutant", "cordon_behind_slots", "--jobs", "2"]
    assert main(mutant) == 1
    out = capsys.readouterr().out
    assert "VIOLATION seed 3: 5 a drained node is cordoned at once" in out, out
    assert out.index("seed 2") < out.index("seed 3")


def _record_without_pointers(world: World) -> None:
    """A command as a version without pointers records it (a rollback): queued, no pointer, no ``indexed``."""
    from adapters.dynamo.store import Store
    from sim.world import CLUSTER

    instance = sorted(i for i, (g, _) in world.view.running_instances().items() if g and g.startswith("nodes-"))[0]
    Store(world.table, CLUSTER).put(
        "CMD#rolled-back-1", {"status": "succeeded", "instance_id": instance, "kind": "cordon", "created_at": "0"}
    )
    # forged (the agent's role may write its partition): names no instance, so nothing points to it, nor must
    Store(world.table, CLUSTER).put("CMD#forged-1", {"status": ["queued"], "instance_id": "not-an-instance"})


def test_a_command_recorded_without_pointers_is_backfilled_before_the_end() -> None:
    rolled_back = _at(600.0, _record_without_pointers)
    result = run_seed(2, nodes=9, days=0.1, profile=CALM, mutate=rolled_back)  # type: ignore[arg-type]
    assert result.violation is None


def test_a_command_left_without_pointers_is_caught_at_the_end(monkeypatch: pytest.MonkeyPatch) -> None:
    for interval in ("BACKFILL_SECONDS", "EARLY_BACKFILL_SECONDS"):  # never again after the first
        monkeypatch.setattr(f"adapters.dynamo.command_index.{interval}", 10 * 86400)
    rolled_back = _at(600.0, _record_without_pointers)
    result = run_seed(2, nodes=9, days=0.1, profile=CALM, mutate=rolled_back)  # type: ignore[arg-type]
    assert result.violation is not None
    assert result.violation.invariant == "commands reachable through their pointers"
    assert "rolled-back-1" in result.violation.detail
