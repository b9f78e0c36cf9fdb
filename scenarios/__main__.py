"""The main job on the local world: ``python -m scenarios [spot-interruption | replenish | refresh]``.

Starts the local world (moto server, kube-apiserver, etcd), plays the scenario, prints its timeline and verdict, stops
everything it started. Exit status: 0 every check passed, 1 a check failed (a broken safety invariant), 2 the scenario
could not finish (ABORTED) or a setting in the environment is invalid (one line naming it; the README's settings
reach the Lambdas and the agent, see ``scenarios.settings``), 3 the local world is not installed, 64 a bad command
line, 130 interrupted by Ctrl-C, 143 stopped by SIGTERM (see ``scenarios.runner``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import NoReturn

from core.exceptions import SettingsError
from localworld.world import LocalWorld
from scenarios import refresh, replenish, runner, spot
from scenarios.settings import check_user_settings
from scenarios.timeline import Timeline

MODULES: dict[str, ModuleType] = {"spot-interruption": spot, "replenish": replenish, "refresh": refresh}
SCENARIOS = {name: module.run for name, module in MODULES.items()}


def _first_line(module: ModuleType) -> str:
    """The docstring's first paragraph on one line, without its "Scenario: " prefix."""
    paragraph = (module.__doc__ or "").strip().split("\n\n")[0]
    return " ".join(paragraph.split()).removeprefix("Scenario: ")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """A bad command line exits 64 (EX_USAGE), not argparse's 2, which means ABORTED here."""
        self.print_usage(sys.stderr)
        self.exit(runner.Exit.USAGE, f"{self.prog}: error: {message}\n")


def _play(name: str) -> runner.Play:
    def play(world: LocalWorld, timeline: Timeline, log_dir: Path) -> None:
        timeline.mark("world", f"moto server {world.moto.endpoint_url}, kube-apiserver {world.kube.url}")
        SCENARIOS[name](world, timeline, log_dir)

    return play


def main(argv: list[str] | None = None) -> int:
    listing = "\n".join(f"  {name:<18} {_first_line(module)}" for name, module in MODULES.items())
    parser = _Parser(
        prog="python -m scenarios",
        description="Runs one scenario on the local world (moto, kube-apiserver, etcd; no AWS account) and prints "
        "its timeline and verdict.",
        epilog=f"scenarios:\n{listing}\n\nexit status: 0 OK, 1 BROKEN (a check failed), 2 ABORTED, "
        "3 local world not installed, 64 usage, 130 interrupted (Ctrl-C), 143 terminated (SIGTERM)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("scenario", nargs="?", default="spot-interruption", choices=sorted(SCENARIOS))
    parser.add_argument("--logs", type=Path, default=None, help="folder for the agent's log (default: a temp dir)")
    args = parser.parse_args(argv)
    try:  # the user's settings reach the Lambdas and the agent: a bad one stops here, before the world starts
        check_user_settings()
    except SettingsError as error:
        print(f"python -m scenarios: SettingsError: {error}", file=sys.stderr)
        return int(runner.Exit.ABORTED)
    log_dir = args.logs or Path(tempfile.mkdtemp(prefix="node-manager-demo-"))
    try:
        return int(runner.run(args.scenario, _play(args.scenario), lambda logs: LocalWorld(log_dir=logs), log_dir))
    except KeyboardInterrupt:  # outside the runner's own handling: before the world exists, or while printing
        print("\ninterrupted (Ctrl-C)", file=sys.stderr)
        return int(runner.Exit.INTERRUPTED)


if __name__ == "__main__":
    sys.exit(main())
