"""The main job's verdict and exit status on the real local world: a scenario aborted on purpose ends ``ABORTED``
(exit 2) with the world stopped, and SIGINT of ``python -m scenarios`` mid-scenario ends ``INTERRUPTED`` (exit 130),
with no traceback and no process left behind."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from localworld.kube_processes import KubeAssetsMissingError, find_assets
from localworld.world import LocalWorld
from scenarios.runner import Exit, run
from scenarios.timeline import Timeline
from tests.processes import as_a_terminal_starts_it

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _assets() -> None:
    try:
        find_assets()
    except KubeAssetsMissingError as err:
        pytest.fail(f"local world unavailable: {err}", pytrace=False)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_scenario_aborted_on_purpose_is_aborted_and_the_world_stopped(tmp_path: Path) -> None:
    seen: list[int] = []

    def play(world: LocalWorld, timeline: Timeline, log_dir: Path) -> None:
        timeline.check("invariant 3: no instance terminated before its node was drained", True)
        seen.extend(world.started_pids())
        raise TimeoutError("timed out after 60 s waiting for the replacement node")

    out, err = io.StringIO(), io.StringIO()
    code = run("abort-on-purpose", play, lambda logs: LocalWorld(log_dir=logs), tmp_path, out=out, err=err)
    text = out.getvalue()
    assert code == Exit.ABORTED == 2, text
    assert "OK:" not in text
    assert text.rstrip().splitlines()[-1] == (
        "ABORTED: the scenario could not finish: TimeoutError: timed out after 60 s waiting for the replacement node "
        "(2/2 checks passed before it stopped)"
    )
    assert len(seen) == 2 and not [pid for pid in seen if _alive(pid)]  # kube-apiserver and etcd, both gone
    assert (
        "[PASS] no process left running: 2 process(es) started by the world, 0 still running after it stopped" in text
    )


def test_sigint_mid_scenario_is_interrupted_with_no_traceback(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "scenarios", "spot-interruption", "--logs", str(tmp_path)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=as_a_terminal_starts_it,
    )
    assert proc.stderr is not None
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # the agent is running: the world has every kind of process by now
            line = proc.stderr.readline()
            lines.append(line)
            if "membership reported" in line or (not line and proc.poll() is not None):
                break
        assert "membership reported" in lines[-1], "".join(lines)
        proc.send_signal(signal.SIGINT)
        out, rest = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = "".join(lines) + rest
    assert proc.returncode == 130, err
    assert "Traceback" not in err, err
    last = out.rstrip().splitlines()[-1]
    assert last.startswith("INTERRUPTED: stopped by Ctrl-C after ") and "(1/1 checks passed)" in last, out
    assert "[PASS] no process left running" in out
