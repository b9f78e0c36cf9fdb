"""A stand-in process for tests of ``LocalWorld.spawn``: prints its settings environment as one JSON line, then
waits to be signalled (at most ``PROBE_SECONDS``, default 60 s). ``python -m localworld.probe``."""

from __future__ import annotations

import json
import os
import sys
import time

KEYS = (
    "AWS_ENDPOINT_URL",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ACCESS_KEY_ID",
    "KUBECONFIG",
    "CLUSTER_NAME",
    "TABLE_NAME",
    "QUEUE_URL",
    "IDEMPOTENCY_TABLE_NAME",
    "EVENT_BUS_NAME",
    "ACCOUNT_ID",
    "PYTHONPATH",
    "PROBE_EXTRA",
)


def main() -> None:
    print(json.dumps({"pid": os.getpid(), "env": {k: os.environ.get(k) for k in KEYS}}), flush=True)
    time.sleep(float(os.environ.get("PROBE_SECONDS", "60")))
    sys.exit(0)


if __name__ == "__main__":
    main()
