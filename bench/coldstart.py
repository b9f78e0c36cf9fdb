"""Cold start of each Lambda, from the asset as it is deployed (not a test; results go to BENCHMARKS.md).

For each Lambda (interruption, replenisher, refresher), ``--runs`` fresh processes of the Lambda's own Python
(CPython 3.12, found as ``infra.bundling.lambda_python`` finds it) each import ``lambdas/<name>/handler.py`` from the
asset built by ``infra.bundling.LocalPythonBundler`` (for this machine's architecture) and call ``lambda_handler``
once with a no-op event against an empty moto server (a Spot warning for an instance no group holds; a scheduled
tick with nothing to do). The process runs with ``-B`` (the Lambda's code folder is read-only: nothing compiled at
start is kept) and ``-I``; boto3 comes from a separate folder, as the Lambda runtime provides it (with bytecode, as
an installed SDK has).

Measured per process: seconds from just before the process is started to the invocation done (the child's marker
line read by this process), and of that, the part until the handler module is imported; and the CPU seconds (user +
system) the whole process used, which a machine shared with other work inflates much less than wall time. Reported:
the median over the runs per Lambda (target <= 0.35 s wall), min and max.

Usage: ``python -m bench.coldstart [--runs 10] [--no-bytecode | --compare] [--markdown]``. ``--no-bytecode`` builds
the asset without bytecode (as before issue 8); ``--compare`` measures both assets, alternating process by process so
both see the same machine load. ``--smoke`` is one process per Lambda and does not judge.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
from moto.server import ThreadedMotoServer

from core import schema
from infra.bundling import (
    PIP_PLATFORMS,
    PROJECT_ROOT,
    PYTHON_VERSION,
    DependencyCache,
    LocalPythonBundler,
    lambda_python,
    runtime_requirements,
)
from infra.config import Architecture

REGION = "us-east-1"
CLUSTER = "coldstart.k8s.local"
TABLE = "node-manager-state"
IDEMPOTENCY_TABLE = "node-manager-idempotency"
EVENTS = PROJECT_ROOT / "tests" / "events"
# Lambda -> the no-op event it is invoked with (a file of tests/events/).
LAMBDAS = {
    "interruption": "spot-interruption-warning.json",
    "replenisher": "scheduled-tick.json",
    "refresher": "scheduled-tick.json",
}
TARGET_SECONDS = 0.35
MARKER = "coldstart-done"

# Runs in the child, the Lambda's Python. argv: asset folder, SDK folder, handler module, event JSON.
CHILD = f"""
import json, sys, time
sys.path[:0] = [sys.argv[1], sys.argv[2]]
import importlib
handler = importlib.import_module(sys.argv[3])
imported = time.time()

class Context:
    function_name = "coldstart"
    function_version = "$LATEST"
    memory_limit_in_mb = 256
    invoked_function_arn = "arn:aws:lambda:{REGION}:123456789012:function:coldstart"
    aws_request_id = "00000000-0000-4000-8000-000000000000"

    def get_remaining_time_in_millis(self):
        return 60000

handler.lambda_handler(json.loads(sys.argv[4]), Context())
print("{MARKER}", imported, flush=True)
"""


def host_architecture() -> Architecture:
    return Architecture.ARM64 if platform.machine() in ("aarch64", "arm64") else Architecture.X86_64


@contextmanager
def moto_server() -> Iterator[str]:
    """An empty moto server holding the state table, the idempotency table and the command queue, each service
    already called once (moto builds a service's backend on its first request: seconds for EC2)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one access-log line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    url = f"http://127.0.0.1:{port}"
    try:
        session = boto3.session.Session(
            aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION
        )
        dynamodb = session.client("dynamodb", endpoint_url=url)
        dynamodb.create_table(**schema.state_table(TABLE))
        dynamodb.create_table(**schema.idempotency_table(IDEMPOTENCY_TABLE))
        session.client("sqs", endpoint_url=url).create_queue(QueueName="commands")
        session.client("ec2", endpoint_url=url).describe_instances()
        session.client("autoscaling", endpoint_url=url).describe_auto_scaling_groups()
        yield url
    finally:
        server.stop()


def child_env(endpoint_url: str, name: str) -> dict[str, str]:
    """What the stack sets on the function, pointed at moto (``AWS_ENDPOINT_URL``, read by botocore itself)."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "AWS_ENDPOINT_URL": endpoint_url,
        "CLUSTER_NAME": CLUSTER,
        "TABLE_NAME": TABLE,
        "IDEMPOTENCY_TABLE_NAME": IDEMPOTENCY_TABLE,
        "QUEUE_URL": f"{endpoint_url}/123456789012/commands",
        "EVENT_BUS_NAME": "default",
        "POWERTOOLS_SERVICE_NAME": name,
        "POWERTOOLS_METRICS_NAMESPACE": "NodeManager",
        "AWS_LAMBDA_FUNCTION_NAME": f"node-manager-{name}",
    }


def event_for(name: str) -> dict[str, Any]:
    """A fresh copy of the Lambda's event: its own id (no idempotency replay) and the current time."""
    event: dict[str, Any] = json.loads((EVENTS / LAMBDAS[name]).read_text())
    event["id"] = str(uuid.uuid4())
    event["time"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return event


Sample = tuple[float, float, float]  # seconds to invocation done, to handler imported; CPU seconds of the process


def one_cold_start(python: str, asset: Path, sdk: Path, name: str, env: dict[str, str]) -> Sample:
    """One fresh process: wall seconds to the invocation done and to the handler imported (both from just before the
    process starts), and the CPU seconds (user + system) the process used.

    Raises:
        RuntimeError: the child failed before its marker line, or exited non-zero.
    """
    command = [python, "-I", "-B", "-c", CHILD, str(asset), str(sdk), f"lambdas.{name}.handler"]
    command.append(json.dumps(event_for(name)))
    started_wall, started = time.time(), time.perf_counter()
    child = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert child.stdout is not None
    done = imported = -1.0
    for line in child.stdout:
        if line.startswith(MARKER) and done < 0:
            done = time.perf_counter() - started
            imported = float(line.split()[1]) - started_wall
    _, status, usage = os.wait4(child.pid, 0)  # reaps the child: its resource usage, which Popen.wait drops
    child.returncode = os.waitstatus_to_exitcode(status)
    child.stdout.close()
    if done < 0 or child.returncode != 0:
        raise RuntimeError(f"lambdas.{name}.handler exited {child.returncode} (run it by hand to see why)")
    return done, imported, usage.ru_utime + usage.ru_stime


def build(folder: Path, bytecode: bool, python: str) -> Path:
    """The Lambda asset for this machine's architecture, with or without bytecode, in ``folder``."""
    asset = folder / ("asset-pyc" if bytecode else "asset-py")
    asset.mkdir()
    LocalPythonBundler(host_architecture(), bytecode=bytecode).bundle(asset)
    return asset


def runtime_sdk(python: str) -> Path:
    """boto3 as the Lambda runtime provides it (outside the asset, with bytecode), at requirements.txt's pin."""
    sdk_lines = runtime_requirements(PROJECT_ROOT / "requirements.txt", ("boto3",))
    return DependencyCache().install(sdk_lines, PIP_PLATFORMS[host_architecture()], compile_with=python)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.coldstart", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="fresh processes per Lambda (and per asset)")
    variant = parser.add_mutually_exclusive_group()
    variant.add_argument("--no-bytecode", action="store_true", help="asset without bytecode (the old build)")
    variant.add_argument("--compare", action="store_true", help="both assets, alternating")
    parser.add_argument("--markdown", action="store_true", help="print the result table as Markdown")
    parser.add_argument("--smoke", action="store_true", help="one process per Lambda; numbers not judged")
    args = parser.parse_args(argv)
    runs = 1 if args.smoke else args.runs
    if runs < 1:
        parser.error("--runs must be at least 1")
    python = lambda_python()
    if python is None:
        parser.error(f"no CPython {PYTHON_VERSION} found (set LAMBDA_PYTHON): cannot run the Lambda's Python")
    bytecodes = [False, True] if args.compare else [not args.no_bytecode]
    samples: dict[tuple[str, bool], list[Sample]] = {}
    with tempfile.TemporaryDirectory(prefix="coldstart-") as tmp, moto_server() as endpoint_url:
        assets = {bytecode: build(Path(tmp), bytecode, python) for bytecode in bytecodes}
        sdk = runtime_sdk(python)
        for name in LAMBDAS:
            env = child_env(endpoint_url, name)
            for _ in range(runs):
                for bytecode, asset in assets.items():
                    samples.setdefault((name, bytecode), []).append(one_cold_start(python, asset, sdk, name, env))
            for bytecode in bytecodes:
                done = [s[0] for s in samples[(name, bytecode)]]
                print(
                    f"{name} (bytecode {'yes' if bytecode else 'no'}): median {statistics.median(done):.3f} s",
                    file=sys.stderr,
                    flush=True,
                )
    if args.markdown:
        print(
            "| Lambda | bytecode | wall median (s) | min - max (s) | of which import, median (s) | CPU median (s) "
            "| target (wall <= 0.35 s) |"
        )
        print("|---|---|---|---|---|---|---|")
    for (name, bytecode), rows in samples.items():
        done, imported, cpu = ([r[i] for r in rows] for i in range(3))
        median = statistics.median(done)
        verdict = "met" if median <= TARGET_SECONDS else "missed"
        cells = [
            name,
            "yes" if bytecode else "no",
            f"{median:.3f}",
            f"{min(done):.3f} - {max(done):.3f}",
            f"{statistics.median(imported):.3f}",
            f"{statistics.median(cpu):.3f}",
            verdict,
        ]
        print("| " + " | ".join(cells) + " |" if args.markdown else ", ".join(cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
