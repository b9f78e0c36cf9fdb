"""``node-manager local up``: the local world (moto server, kube-apiserver + etcd, the kOps cluster simulator) with a
kOps cluster and the agent running, for trying the CLI and the Lambdas without AWS. Needs a checkout whose
``scripts/bootstrap.sh`` has run (``KUBEBUILDER_ASSETS`` or the assets it installed) and the ``local`` extra (moto).
"""

from __future__ import annotations

import contextlib
import shlex
import signal
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

# The variables printed for the operator's shell: moto's endpoint and fake credentials, the cluster's settings, the
# admin kubeconfig.
SHOWN = (
    "AWS_ENDPOINT_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_DEFAULT_REGION",
    "AWS_REGION",
    "AWS_EC2_METADATA_DISABLED",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "KUBECONFIG",
    "CLUSTER_NAME",
    "TABLE_NAME",
    "QUEUE_URL",
    "IDEMPOTENCY_TABLE_NAME",
    "EVENT_BUS_NAME",
    "ACCOUNT_ID",
)

READY_LINE = "# node-manager local world ready; Ctrl-C stops it"


def exports(env: Mapping[str, str]) -> list[str]:
    """``export NAME=value`` lines (shell-quoted) for the variables of ``SHOWN`` present in ``env``."""
    return [f"export {name}={shlex.quote(env[name])}" for name in SHOWN if name in env]


def up(
    cluster: str,
    nodes_per_az: int,
    agent: bool,
    out: Callable[[str], None],
    err: Callable[[str], None],
    stop_after: float | None = None,
) -> int:
    """Start the world, print its environment on ``out`` (then ``READY_LINE``), wait for SIGINT/SIGTERM (or
    ``stop_after`` seconds), stop everything. Returns the exit code: 128 + the signal's number when a signal stopped
    it (130 for Ctrl-C, as every other command of the CLI; 143 for SIGTERM), 0 when ``stop_after`` ended it, 1 when
    the agent died, 2 when the kube assets are missing (the install hint on ``err``).

    Raises:
        FileNotFoundError, RuntimeError, TimeoutError: the world could not start (assets missing, ports, ...).
    """
    from localworld.kube_processes import KubeAssetsMissingError, find_assets
    from localworld.world import LocalWorld

    try:
        find_assets()
    except KubeAssetsMissingError as error:
        err(f"node-manager local up: {error}")
        return 2
    world = LocalWorld()
    stopping: list[int] = []

    def on_signal(signum: int, frame: Any) -> None:
        stopping.append(signum)

    try:
        # the world's progress lines go to stderr: stdout carries only the export lines (for `eval`)
        with contextlib.redirect_stdout(sys.stderr):
            world.start()
            info = world.setup_cluster(name=cluster, nodes_per_az=nodes_per_az)
        if agent:
            proc = world.spawn("agent")
            err(f"agent running (pid {proc.pid}, log {proc.log_path})")
        for line in exports(world.env(kubeconfig="admin")):
            out(line)
        out(READY_LINE)
        err(
            f"cluster {info.name}: {len(info.all_asgs)} Auto Scaling groups; try `python -m cli --local status` "
            "(`node-manager` after `pip install -e .`)"
        )
        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            ends = None if stop_after is None else time.monotonic() + stop_after
            while not stopping and (ends is None or time.monotonic() < ends):
                if agent and not proc.alive():
                    err(f"the agent exited ({proc.returncode}); see {proc.log_path}")
                    return 1
                time.sleep(0.2)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        err("stopping the local world")
        return 128 + stopping[0] if stopping else 0  # the shell's convention for a process a signal ended
    finally:
        world.stop()
