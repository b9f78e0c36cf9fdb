"""One seed gives one run, whatever the process: the faulty agent scenario (``tests.unit.sim.agent_scenario``)
digested in two processes with different string-hash seeds, and in this one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.unit.sim.agent_scenario import digest

ROOT = Path(__file__).resolve().parents[3]


def run(hash_seed: str) -> str:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    out = subprocess.run(
        [sys.executable, "-m", "tests.unit.sim.agent_scenario"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    return out.stdout.strip().splitlines()[-1]


def test_one_seed_gives_one_run_across_processes() -> None:
    assert run("1") == run("2") == digest(5)
    assert digest(6) != digest(5)
