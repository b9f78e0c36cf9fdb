"""Runs one scenario on the local world and turns what happened into a verdict and an exit status.

The exit statuses (the README's "What `make demo` shows" lists them too):

====  ===============  ===================================================================================
code  verdict          meaning
====  ===============  ===================================================================================
0     ``OK``           the scenario ran to its end and every check passed
1     ``BROKEN``       a check failed: a safety invariant broke (wins over an abort: it is the worse news)
2     ``ABORTED``      the scenario could not finish (an error in it, or the local world did not start)
3     (one line)       the local world is not installed (etcd / kube-apiserver missing): nothing was started
64    (usage)          a bad command line (argparse's message)
130   ``INTERRUPTED``  Ctrl-C (SIGINT): the world was stopped and the checks made so far are shown
143   ``INTERRUPTED``  SIGTERM (``LocalWorld`` turns it into ``SystemExit(143)``): the same, stopped by SIGTERM
====  ===============  ===================================================================================
"""

from __future__ import annotations

import contextlib
import enum
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol, TextIO

from localworld.kube_processes import KubeAssetsMissingError
from scenarios.timeline import Timeline


class Exit(enum.IntEnum):
    OK = 0
    BROKEN = 1
    ABORTED = 2
    NOT_INSTALLED = 3
    USAGE = 64
    INTERRUPTED = 130
    TERMINATED = 143  # 128 + SIGTERM


class World(Protocol):
    """What the runner needs of ``localworld.world.LocalWorld`` (tests pass a fake)."""

    def start(self) -> Any: ...

    def stop(self) -> None: ...

    def started_pids(self) -> list[int]: ...


Play = Callable[[Any, Timeline, Path], None]  # a scenario module's ``run(world, timeline, log_dir)``
WorldFactory = Callable[[Path], World]  # builds the world (raises KubeAssetsMissingError when not installed)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, someone else's now
        return True
    return True


@contextlib.contextmanager
def _patient_sigint(err: TextIO) -> Iterator[None]:
    """While the world stops, Ctrl-C says "please wait" instead of breaking the cleanup (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def wait_please(signum: int, frame: Any) -> None:
        print("still stopping the local world; it takes a few seconds", file=err, flush=True)

    previous = signal.signal(signal.SIGINT, wait_please)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def run(
    name: str,
    play: Play,
    world_factory: WorldFactory,
    log_dir: Path,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> Exit:
    """Start the world, play ``name``, stop the world, print the timeline and the verdict; returns the exit status.

    Args:
        name: the scenario's name (printed). play: the scenario (``scenarios.<module>.run``).
        world_factory: builds a not yet started world writing its logs to a folder.
        log_dir: folder for the processes' logs. out, err: verdict and timeline / progress and errors (default
            stdout / stderr).

    Returns the ``Exit`` above. Raises nothing for what a scenario or the world raises (``Exception`` and
    ``KeyboardInterrupt`` and the world's SIGTERM ``SystemExit(143)`` become verdicts); another ``SystemExit`` passes
    after the world stopped.
    """
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        world = world_factory(log_dir)
    except KubeAssetsMissingError as missing:
        print(f"python -m scenarios: the local world is not installed: {missing}", file=err, flush=True)
        return Exit.NOT_INSTALLED

    timeline = Timeline(out=out, progress=err)
    print(f"Scenario {name} on the local world (logs in {log_dir})\n", file=out, flush=True)
    stopped: Exit | None = None
    why = ""
    pids: list[int] = []
    started = False
    try:
        world.start()
        started = True
        play(world, timeline, log_dir)
    except KeyboardInterrupt:
        stopped, why = Exit.INTERRUPTED, f"stopped by Ctrl-C after {time.monotonic() - timeline.start:.1f} s"
        timeline.mark("world", "interrupted (Ctrl-C): stopping the local world")
    except SystemExit as exiting:
        if exiting.code != Exit.TERMINATED:
            raise
        stopped, why = Exit.TERMINATED, f"stopped by SIGTERM after {time.monotonic() - timeline.start:.1f} s"
        timeline.mark("world", "terminated (SIGTERM): stopping the local world")
    except Exception as error:  # noqa: BLE001 - becomes the ABORTED verdict, after cleanup
        what = "the scenario could not finish" if started else "the local world did not start"
        stopped, why = Exit.ABORTED, f"{what}: {type(error).__name__}: {error}"
        timeline.mark("world", f"scenario aborted: {type(error).__name__}: {error}")
    finally:
        with _patient_sigint(err):
            pids = world.started_pids()
            try:
                world.stop()
            except Exception as error:  # noqa: BLE001 - reported; the leftover check below says what remains
                if stopped is None:
                    stopped, why = Exit.ABORTED, f"the local world did not stop: {type(error).__name__}: {error}"
    leftover = [pid for pid in pids if _alive(pid)]
    timeline.check(
        "no process left running",
        not leftover,
        f"{len(pids)} process(es) started by the world, {len(leftover)} still running after it stopped"
        + (f" (pids {leftover})" if leftover else ""),
    )

    interrupted = stopped in (Exit.INTERRUPTED, Exit.TERMINATED)
    if not interrupted:  # an interrupted run gets the short form: its progress is on screen
        timeline.print_timeline()
    failed = not timeline.ok
    if interrupted:
        headline = f"INTERRUPTED: {why}; the local world is stopped ({timeline.summary()})"
    elif failed:
        headline = f"BROKEN: {timeline.summary()}" + (f"; also, {why}" if stopped else "")
        stopped = Exit.BROKEN
    elif stopped is Exit.ABORTED:
        headline = f"ABORTED: {why} ({timeline.summary()} before it stopped)"
    else:
        headline, stopped = f"OK: {timeline.summary()}", Exit.OK
    timeline.print_verdict(headline)
    assert stopped is not None  # an interrupted run has its signal's exit; every other branch set one
    return stopped
