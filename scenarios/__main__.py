"""The main job on the local world: ``python -m scenarios [spot-interruption | replenish | refresh] [--chart FILE]``.

Starts the local world (moto server, kube-apiserver, etcd), plays the scenario, prints its timeline and verdict, stops
everything it started. Exit status: 0 every check passed, 1 a check failed (a broken safety invariant), 2 the scenario
could not finish (ABORTED) or a setting in the environment is invalid (one line naming it; the README's settings
reach the Lambdas and the agent, see ``scenarios.settings``; or ``--chart`` cannot be drawn: matplotlib, the
``charts`` extra, is missing, or the file's suffix is not .svg/.png/.pdf), 3 the local world is not installed, 64 a
bad command line, 130 interrupted by Ctrl-C, 143 stopped by SIGTERM (see ``scenarios.runner``).
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


def _play(name: str, chart: Path | None = None) -> runner.Play:
    """The scenario ``name``; with ``chart``, a ``FleetRecorder`` watches it and its picture is written to ``chart``
    when it ends, however it ends (the timeline says where, or why not)."""

    def play(world: LocalWorld, timeline: Timeline, log_dir: Path) -> None:
        timeline.mark("world", f"moto server {world.moto.endpoint_url}, kube-apiserver {world.kube.url}")
        if chart is None:
            SCENARIOS[name](world, timeline, log_dir)
            return
        from scenarios.fleetchart import FleetRecorder, write_chart

        recorder = FleetRecorder(world, timeline)
        recorder.start()
        try:
            SCENARIOS[name](world, timeline, log_dir)
        finally:
            try:
                drawn = write_chart(recorder, chart, f"scenario {name} on the local world")
                timeline.mark("world", f"chart {chart}: {len(drawn.rows)} instance rows, {len(drawn.pools)} groups")
            except Exception as error:  # noqa: BLE001 - a picture that cannot be drawn does not change the verdict
                timeline.mark("world", f"chart {chart} not written: {type(error).__name__}: {error}")

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
    parser.add_argument(
        "--logs", type=Path, default=None, help="folder for the agent's and the Lambdas' logs (default: a temp dir)"
    )
    parser.add_argument(
        "--chart",
        type=Path,
        metavar="FILE",
        default=None,
        help="draw what the scenario saw into FILE (.svg, .png, .pdf): a timeline per instance and Ready nodes per "
        "group; needs the charts extra (pip install '.[charts]' in a checkout)",
    )
    args = parser.parse_args(argv)
    if args.chart is not None:  # before the world starts: a missing library or a bad name is one line, exit 2
        from charts.render import ChartsUnavailableError, check_path, require

        try:
            require()
            check_path(args.chart)
        except (ChartsUnavailableError, ValueError) as error:
            print(f"python -m scenarios: {error}", file=sys.stderr)
            return int(runner.Exit.ABORTED)
    try:  # the user's settings reach the Lambdas and the agent: a bad one stops here, before the world starts
        check_user_settings()
    except SettingsError as error:
        print(f"python -m scenarios: SettingsError: {error}", file=sys.stderr)
        return int(runner.Exit.ABORTED)
    log_dir = args.logs or Path(tempfile.mkdtemp(prefix="node-manager-demo-"))
    try:
        play = _play(args.scenario, args.chart)
        return int(runner.run(args.scenario, play, lambda logs: LocalWorld(log_dir=logs), log_dir))
    except KeyboardInterrupt:  # outside the runner's own handling: before the world exists, or while printing
        print("\ninterrupted (Ctrl-C)", file=sys.stderr)
        return int(runner.Exit.INTERRUPTED)


if __name__ == "__main__":
    sys.exit(main())
