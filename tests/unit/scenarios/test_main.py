"""``python -m scenarios`` from the command line: the listing, a bad command line, and a machine without the local
world's binaries (the real LocalWorld, pointed at an empty folder: nothing starts)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def scenarios(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scenarios", *args],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_help_lists_each_scenario_in_one_line() -> None:
    done = scenarios("--help")
    assert done.returncode == 0
    lines = done.stdout.splitlines()
    for name in ("spot-interruption", "replenish", "refresh"):
        assert any(line.split()[:1] == [name] and len(line.split()) > 3 for line in lines), done.stdout
    assert "130 interrupted" in done.stdout


def test_a_bad_command_line_exits_64_not_the_aborted_status() -> None:
    done = scenarios("no-such-scenario")
    assert done.returncode == 64
    assert "invalid choice: 'no-such-scenario'" in done.stderr


def test_missing_kube_assets_is_one_line_with_the_install_hint_and_exit_3(tmp_path: Path) -> None:
    done = scenarios("spot-interruption", "--logs", str(tmp_path / "logs"), KUBEBUILDER_ASSETS=str(tmp_path))
    assert done.returncode == 3, done.stderr
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"python -m scenarios: the local world is not installed: {tmp_path / 'etcd'} not found or not executable; "
        "run scripts/install-kube-assets.sh (it prints the folder to export as KUBEBUILDER_ASSETS)"
    ]
