"""A small faulty scenario of the simulated agent (kube and DynamoDB errors, Spot and refresh drains under budgets, a
restart), summarized as one digest of every executed step and the end state: run as a module it prints the digest,
so a test can compare runs in separate processes (different ``PYTHONHASHSEED``s)."""

from __future__ import annotations

import hashlib
import logging

from adapters.dynamo.store import Store
from core.exceptions import StoreUnavailableError
from core.settings import AgentSettings
from sim.agent import SimAgent
from sim.dynamo import MemoryDynamo
from sim.faults import Faults, FaultWindow
from sim.kernel import Kernel
from sim.kube import SimKube
from sim.kube_objects import Budget
from tests.unit.sim.agent_world import CLUSTER, AutoScaling, Queue, drain, send


def digest(seed: int) -> str:
    logging.disable(logging.CRITICAL)  # the product logs every step; undone at the end (other tests read logs)
    try:
        return _digest(seed)
    finally:
        logging.disable(logging.NOTSET)


def _digest(seed: int) -> str:
    kernel = Kernel(seed)
    faults = Faults(kernel)
    faults.add(FaultWindow("kube", "", 0, 400, "InternalError", probability=0.3))
    faults.add(FaultWindow("dynamodb", "", 0, 400, "ProvisionedThroughputExceededException", probability=0.1))
    kube = SimKube(kernel, faults)
    for i in range(6):
        kube.add_node(f"n{i}", f"i-{i:017x}", "us-east-1a")
    kube.add_daemonset("kube-system", "cni")
    kube.add_daemonset("kube-system", "logs")
    for d in range(4):
        kube.add_deployment("default", f"d{d}", 8, grace=15)
        kube.add_budget(Budget("default", f"d{d}", {"app": f"d{d}"}, max_unavailable=1))
    table = MemoryDynamo(kernel, faults).table("state")
    queue = Queue(kernel)
    settings = AgentSettings(cluster_name=CLUSTER, table_name="state", queue_url="q")
    steps: list[str] = []
    with kernel.installed():
        agent = SimAgent(kernel, kube, queue, table, AutoScaling(kernel=kernel), settings)
        kernel.run(30)
        store = Store(table, CLUSTER)
        for i in range(4):
            reason = "spot-interruption:terminate" if i % 2 else "refresh"
            try:
                send(store, queue, drain(kernel, f"d{i}", f"i-{i:017x}", 600, reason=reason))
            except StoreUnavailableError as err:  # an injected throttle refused the record: part of the digest
                steps.append(f"send d{i}: {type(err).__name__}")
        kernel.after(100, "restart", agent.restart)
        kernel.run(1200, after_step=lambda s: steps.append(f"{s.at:.6f} {s.label}"))
    steps.append(repr((kube.counters, agent.counts, sorted(faults.injected.items()))))
    steps.append(repr(sorted((i["sk"], i.get("status"), i.get("attempt")) for i in table.items())))
    return hashlib.sha256("\n".join(steps).encode()).hexdigest()


if __name__ == "__main__":
    print(digest(5))
