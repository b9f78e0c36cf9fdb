"""The Makefile's targets prepare only what they need: ``make synth`` and ``make lint`` the virtualenv alone (a
deployer's laptop has no apt-get and no Go), ``make demo`` and ``make test`` the local world too."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def planned(target: str) -> list[str]:
    """The commands ``make`` would run for ``target`` (``make -n``: printed, not run)."""
    done = subprocess.run(["make", "-n", "-C", str(ROOT), target], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.mark.parametrize("target", ["synth", "lint"])
def test_synth_and_lint_bootstrap_only_the_virtualenv(target: str) -> None:
    bootstraps = [line for line in planned(target) if "scripts/bootstrap.sh" in line]
    assert bootstraps and all(line.endswith("scripts/bootstrap.sh --venv-only") for line in bootstraps), bootstraps


@pytest.mark.parametrize("target", ["demo", "test", "bench"])
def test_the_local_world_targets_run_the_whole_bootstrap(target: str) -> None:
    bootstraps = [line for line in planned(target) if "scripts/bootstrap.sh" in line]
    assert bootstraps and all(line.endswith("scripts/bootstrap.sh") for line in bootstraps), bootstraps
