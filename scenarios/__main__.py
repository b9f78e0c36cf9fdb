"""The main job on the local world: ``python -m scenarios [spot-interruption | replenish | refresh]``.

Starts the local world (moto server, kube-apiserver, etcd), plays the scenario, prints its timeline and verdict, stops
everything it started, and exits 1 if any check failed (a broken safety invariant), 2 if the scenario could not run.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from localworld.world import LocalWorld
from scenarios import refresh, replenish, spot
from scenarios.timeline import Timeline

SCENARIOS = {"spot-interruption": spot.run, "replenish": replenish.run, "refresh": refresh.run}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scenarios", description=__doc__.splitlines()[0])
    parser.add_argument("scenario", nargs="?", default="spot-interruption", choices=sorted(SCENARIOS))
    parser.add_argument("--logs", type=Path, default=None, help="folder for the agent's log (default: a temp dir)")
    args = parser.parse_args(argv)
    log_dir = args.logs or Path(tempfile.mkdtemp(prefix="node-manager-demo-"))

    timeline = Timeline()
    print(f"Scenario {args.scenario} on the local world (logs in {log_dir})\n")
    pids: list[int] = []
    failed_to_run: BaseException | None = None
    with LocalWorld(log_dir=log_dir) as world:
        timeline.mark("world", f"moto server {world.moto.endpoint_url}, kube-apiserver {world.kube.url}")
        try:
            SCENARIOS[args.scenario](world, timeline, log_dir)
        except Exception as err:  # noqa: BLE001 - reported as a failed run, after cleanup
            failed_to_run = err
            timeline.mark("world", f"scenario aborted: {type(err).__name__}: {err}")
        pids = [p.pid for p in world._spawned] + [
            proc.pid for proc in (world.kube._apiserver, world.kube._etcd) if proc is not None
        ]
    leftover = [pid for pid in pids if _alive(pid)]
    timeline.check("no process left running", not leftover, f"{len(pids)} processes started, left: {leftover}")
    timeline.print_timeline()
    timeline.print_verdict()
    if failed_to_run is not None:
        print(f"\nthe scenario could not finish: {failed_to_run}", file=sys.stderr)
        return 2
    return 0 if timeline.ok else 1


if __name__ == "__main__":
    sys.exit(main())
