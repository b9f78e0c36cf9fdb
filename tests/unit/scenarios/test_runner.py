"""The scenario runner's verdict and exit status, with fake scenarios and a fake world (no local world needed): a
scenario that aborts never ends with ``OK``, a missing install is one line and exit 3, Ctrl-C is a short verdict."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from localworld.kube_processes import KubeAssetsMissingError
from scenarios.runner import Exit, run
from scenarios.timeline import Timeline
from tests.processes import as_a_terminal_starts_it

ROOT = Path(__file__).resolve().parents[3]


class FakeWorld:
    """Starts one real child process (``sleep``) and stops it unless told to leave it behind."""

    def __init__(self, leave_behind: bool = False, fail_start: Exception | None = None) -> None:
        self.leave_behind = leave_behind
        self.fail_start = fail_start
        self.proc: subprocess.Popen[bytes] | None = None
        self.stops = 0

    def start(self) -> FakeWorld:
        if self.fail_start:
            raise self.fail_start
        self.proc = subprocess.Popen(["sleep", "60"])
        return self

    def stop(self) -> None:
        self.stops += 1
        if self.proc and not self.leave_behind:
            self.proc.kill()
            self.proc.wait()

    def started_pids(self) -> list[int]:
        return [self.proc.pid] if self.proc else []


def play_run(play: Any, world: FakeWorld | None = None) -> tuple[Exit, str, str, FakeWorld]:
    world = world or FakeWorld()
    out, err = io.StringIO(), io.StringIO()
    try:
        code = run("fake", play, lambda _logs: world, Path("/tmp/logs"), out=out, err=err)
    finally:
        if world.proc and world.proc.poll() is None:
            world.proc.kill()
            world.proc.wait()
    return code, out.getvalue(), err.getvalue(), world


def last_line(text: str) -> str:
    return text.rstrip().splitlines()[-1]


def test_a_scenario_that_passes_is_ok() -> None:
    def play(world: FakeWorld, timeline: Timeline, log_dir: Path) -> None:
        timeline.check("invariant 3: drained before terminated", True)

    code, out, _, world = play_run(play)
    assert code is Exit.OK and code == 0
    assert last_line(out) == "OK: 2/2 checks passed"
    assert world.stops == 1


def test_a_scenario_that_aborts_is_aborted_not_ok() -> None:
    def play(world: FakeWorld, timeline: Timeline, log_dir: Path) -> None:
        raise TimeoutError("timed out after 60 s waiting for the node to be Ready")

    code, out, _, world = play_run(play)
    assert code == 2
    assert "OK:" not in out
    assert last_line(out) == (
        "ABORTED: the scenario could not finish: TimeoutError: timed out after 60 s waiting for the node to be Ready "
        "(1/1 checks passed before it stopped)"
    )
    assert "scenario aborted: TimeoutError" in out  # on the timeline too
    assert world.stops == 1 and world.proc is not None and world.proc.poll() is not None


def test_a_failed_check_is_broken_even_when_the_scenario_also_aborted() -> None:
    def play(world: FakeWorld, timeline: Timeline, log_dir: Path) -> None:
        timeline.check("invariant 4: desired capacity ends where it was", False, "desired 3 -> 4")
        raise RuntimeError("no worker node in the cluster")

    code, out, _, _ = play_run(play)
    assert code == 1
    assert last_line(out) == (
        "BROKEN: 1/2 checks passed; also, the scenario could not finish: RuntimeError: no worker node in the cluster"
    )


def test_a_process_left_running_breaks_the_verdict() -> None:
    def play(world: FakeWorld, timeline: Timeline, log_dir: Path) -> None:
        timeline.check("a", True)

    code, out, _, world = play_run(play, FakeWorld(leave_behind=True))
    assert code == 1
    assert (
        "[FAIL] no process left running: 1 process(es) started by the world, 1 still running after it stopped "
        f"(pids [{world.proc.pid}])" in out
    )


def test_a_world_that_does_not_start_is_aborted_and_still_stopped() -> None:
    played = []
    world = FakeWorld(fail_start=RuntimeError("kube-apiserver did not become ready in 30 s"))
    code, out, _, _ = play_run(lambda *args: played.append(args), world)
    assert code == 2 and not played and world.stops == 1
    assert last_line(out).startswith("ABORTED: the local world did not start: RuntimeError: kube-apiserver did not")


def test_missing_kube_assets_is_one_line_and_exit_3() -> None:
    def not_installed(_logs: Path) -> FakeWorld:
        raise KubeAssetsMissingError("/x/etcd not found or not executable; run scripts/install-kube-assets.sh")

    out, err = io.StringIO(), io.StringIO()
    code = run("fake", lambda *a: None, not_installed, Path("/tmp/logs"), out=out, err=err)
    assert code == Exit.NOT_INSTALLED == 3
    assert out.getvalue() == ""
    assert err.getvalue().splitlines() == [
        "python -m scenarios: the local world is not installed: /x/etcd not found or not executable; "
        "run scripts/install-kube-assets.sh"
    ]


def test_ctrl_c_in_the_scenario_is_a_short_interrupted_verdict() -> None:
    def play(world: FakeWorld, timeline: Timeline, log_dir: Path) -> None:
        timeline.mark("agent", "node cordoned")
        raise KeyboardInterrupt

    code, out, _, world = play_run(play)
    assert code == 130
    assert world.stops == 1 and world.proc is not None and world.proc.poll() is not None
    assert "Timeline" not in out  # the short form: the progress lines were on stderr as they happened
    assert last_line(out).startswith("INTERRUPTED: stopped by Ctrl-C after ")
    assert last_line(out).endswith("s; the local world is stopped (1/1 checks passed)")


def test_sigterm_in_the_world_is_an_interrupted_verdict_and_exit_143() -> None:
    def play(world: FakeWorld, timeline: Timeline, log_dir: Path) -> None:
        raise SystemExit(143)  # what LocalWorld's SIGTERM handler raises

    code, out, _, world = play_run(play)
    assert code == 143 and world.stops == 1
    assert last_line(out).startswith("INTERRUPTED: stopped by SIGTERM after ")


def test_another_system_exit_passes_after_the_world_stopped() -> None:
    def play(world: FakeWorld, timeline: Timeline, log_dir: Path) -> None:
        raise SystemExit(7)

    world = FakeWorld()
    with pytest.raises(SystemExit):
        play_run(play, world)
    assert world.stops == 1


# A real SIGINT, as a terminal's Ctrl-C sends it: the runner in its own process, with a fake world whose stop takes
# a moment (a second Ctrl-C then must not break the cleanup).
CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from scenarios.runner import run

    class World:
        def start(self): return self
        def started_pids(self): return []
        def stop(self):
            print("stopping", file=sys.stderr, flush=True)
            time.sleep(1.0)
            print("stopped", file=sys.stderr, flush=True)

    def play(world, timeline, log_dir):
        print("playing", file=sys.stderr, flush=True)
        time.sleep(30)

    sys.exit(run("fake", play, lambda logs: World(), Path("/tmp")))
    """
)


def wait_for(proc: subprocess.Popen[str], line: str, seen: list[str]) -> None:
    assert proc.stderr is not None
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        got = proc.stderr.readline()
        seen.append(got)
        if got.strip() == line:
            return
        if not got and proc.poll() is not None:
            break
    pytest.fail(f"never saw {line!r}: {''.join(seen)}")


def test_sigint_ends_with_a_verdict_and_no_traceback_even_when_pressed_twice() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=as_a_terminal_starts_it,
    )
    seen: list[str] = []
    try:
        wait_for(proc, "playing", seen)
        proc.send_signal(signal.SIGINT)
        wait_for(proc, "stopping", seen)
        proc.send_signal(signal.SIGINT)  # impatient: the cleanup goes on
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = "".join(seen) + err
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert "still stopping the local world" in err and "stopped" in err.splitlines()
    assert last_line(out).startswith("INTERRUPTED: stopped by Ctrl-C after ")
