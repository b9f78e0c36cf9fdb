"""The measuring side of ``bench.membership``: one fresh agent-like process that runs membership resyncs.

Run as a script (``python bench/membership_probe.py``) with the tree under measure first on ``PYTHONPATH``, so the
same probe measures this tree and an exported older one (it uses only what both have: ``KubeAdapter``,
``MembershipReporter(nodes, store, asgs, resync_seconds, ttl_seconds, clock=...)``, ``AsgLookup``, ``Store``).
It imports ``agent.app`` first, so the process holds every module the agent holds.

Environment: ``KUBECONFIG`` (the local kube-apiserver), ``AWS_ENDPOINT_URL`` and credentials (the moto server),
``PROBE_TABLE``, ``PROBE_CLUSTER``, ``PROBE_RESYNCS``, ``PROBE_RESYNC_SECONDS``, ``PROBE_TTL_SECONDS``.

Each resync runs with the reporter's clock advanced by ``PROBE_RESYNC_SECONDS`` (as if a resync period passed).
Measured per resync: CPU seconds of the process (user + system, ``time.process_time``), wall seconds, AWS calls by
operation (botocore ``before-call`` events on the session every client is built from), ``VmRSS`` after it; at the
end ``VmHWM`` (the peak RSS). Prints one JSON line.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any


def status_mib(field: str) -> float:
    """A ``/proc/self/status`` memory field (``VmRSS``, ``VmHWM``) in MiB."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    import boto3

    import agent.app  # noqa: F401  # every module the agent process holds, as in production
    from adapters.aws.autoscaling import AutoScaling
    from adapters.dynamo.store import Store
    from agent.asglookup import AsgLookup
    from agent.kube.client import KubeAdapter, kube_configuration, make_api_client
    from agent.membership import MembershipReporter

    calls: Counter[str] = Counter()

    def count(event_name: str, **_: Any) -> None:
        calls[".".join(event_name.split(".")[1:3])] += 1  # before-call.<service>.<Operation>

    session = boto3.Session()
    session.events.register("before-call", count)
    resync_seconds = int(os.environ["PROBE_RESYNC_SECONDS"])
    offset = [timedelta()]

    def clock() -> datetime:
        return datetime.now(UTC) + offset[0]

    kube = KubeAdapter(make_api_client(kube_configuration(os.environ)))
    store = Store(session.resource("dynamodb").Table(os.environ["PROBE_TABLE"]), os.environ["PROBE_CLUSTER"])
    reporter = MembershipReporter(
        kube,
        store,
        AsgLookup(AutoScaling(session.client("autoscaling"))),
        resync_seconds,
        int(os.environ["PROBE_TTL_SECONDS"]),
        clock=clock,
    )
    started_rss = status_mib("VmRSS")
    resyncs = []
    for n in range(int(os.environ["PROBE_RESYNCS"])):
        offset[0] = timedelta(seconds=n * resync_seconds)
        calls.clear()
        cpu, wall = time.process_time(), time.perf_counter()
        reporter.resync()
        resyncs.append(
            {
                "cpu_seconds": time.process_time() - cpu,
                "wall_seconds": time.perf_counter() - wall,
                "calls": dict(calls),
                "rss_mib": status_mib("VmRSS"),
            }
        )
    print(json.dumps({"started_rss_mib": started_rss, "peak_rss_mib": status_mib("VmHWM"), "resyncs": resyncs}))


if __name__ == "__main__":
    main()
