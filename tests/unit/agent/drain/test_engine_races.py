"""The drain engine on an in-memory cluster (``fakecluster``) while the node's cordon or pods change under a running
drain: an uncordon command for the node, an operator's uncordon, a pod re-created under the same name."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from agent.drain.engine import DrainEngine
from agent.drain.results import NodeCommandResult
from agent.kube.eviction import EvictionResponse
from core.model import Command, CommandKind, CommandStatus, utcnow
from core.settings import AgentSettings
from tests.unit.agent.drain.fakecluster import EVICT, INSTANCE, PDB, FakeCluster, pod

SETTINGS = AgentSettings(
    cluster_name="demo", table_name="t", queue_url="q", eviction_backoff_seconds=0.05, eviction_backoff_max_seconds=0.1
)


def command(
    command_id: str, kind: str = "drain", reason: str = "refresh r1 step 0", deadline_in: float = 30
) -> Command:
    return Command(
        command_id=command_id,
        cluster="demo",
        kind=CommandKind(kind),
        instance_id=INSTANCE,
        node_name="n1",
        reason=reason,
        deadline=utcnow() + timedelta(seconds=deadline_in),
    )


def pdb_until(allowed: threading.Event) -> Callable[[int | None], EvictionResponse]:
    """A PodDisruptionBudget refuses the pod's eviction until ``allowed`` is set."""
    return lambda grace: EVICT if allowed.is_set() else PDB


def start(engine: DrainEngine, cmd: Command, kube: FakeCluster) -> tuple[threading.Thread, dict[str, Any]]:
    """Run ``cmd`` on a thread; return once its first eviction was sent."""
    out: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: out.update(result=engine.run(cmd)), daemon=True)
    thread.start()
    until = time.monotonic() + 5
    while not kube.evictions and time.monotonic() < until:
        time.sleep(0.01)
    assert kube.evictions, "the drain never sent an eviction"
    return thread, out


def finish(thread: threading.Thread, out: dict[str, Any]) -> NodeCommandResult:
    thread.join(10)
    assert not thread.is_alive()
    result = out["result"]
    assert isinstance(result, NodeCommandResult)
    return result


def test_an_uncordon_command_leaves_the_cordon_of_a_drain_running_in_the_engine() -> None:
    kube = FakeCluster()
    kube.add_pod(pod("a"))
    allowed = threading.Event()
    kube.policy["web/a"] = pdb_until(allowed)
    engine = DrainEngine(kube, SETTINGS)  # type: ignore[arg-type]
    thread, out = start(engine, command("refresh-r1-0"), kube)
    assert kube.nodes["n1"].cordoned_by == "refresh-r1-0"
    # a late uncordon for the same instance (a give-back kept, a sweep's re-send) arrives meanwhile
    uncordon = engine.run(command("replenish-giveback-uncordon-1", kind="uncordon"))
    assert uncordon.status is CommandStatus.SUCCEEDED and not uncordon.uncordoned
    assert "being drained by command refresh-r1-0" in uncordon.message
    assert kube.nodes["n1"].unschedulable
    allowed.set()
    result = finish(thread, out)
    assert result.status is CommandStatus.SUCCEEDED and result.cordoned_by_us
    assert kube.nodes["n1"].unschedulable and kube.nodes["n1"].cordoned_by == "refresh-r1-0"
    # the drain over, an uncordon undoes its cordon as before
    after = engine.run(command("replenish-giveback-uncordon-2", kind="uncordon"))
    assert after.uncordoned and not kube.nodes["n1"].unschedulable
