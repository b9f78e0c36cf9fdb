"""What the drain engine's tests on the local world share (``test_drain.py``, ``test_drain_deadline.py``): short
eviction backoffs, a command of the case, and reads of nodes, pods and events through the world's REST client; the
``engine`` fixture is the directory's ``conftest.py``'s.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from agent.drain.results import NodeCommandResult
from core.model import Command, CommandKind, DrainOptions, parse_provider_id, utcnow
from core.settings import PdbDeadlinePolicy
from localworld.rest import KubeRest, q
from localworld.simulator.objects import is_live, pod_ready
from localworld.workloads import (
    pods_on_node,
)
from localworld.world import LocalWorld


@dataclass(frozen=True)
class Backoff:
    """Eviction backoff for tests: short, so a PDB-blocked pod is retried several times in a few seconds."""

    eviction_backoff_seconds: float = 0.2
    eviction_backoff_max_seconds: float = 1.0
    drain_grace_margin_seconds: float = 10.0
    drain_pdb_deadline_policy: PdbDeadlinePolicy = PdbDeadlinePolicy.DELETE


def command(
    kind: CommandKind,
    instance_id: str,
    seconds: float = 30.0,
    *,
    node_name: str | None = None,
    command_id: str | None = None,
    options: DrainOptions | None = None,
    reason: str = "",
) -> Command:
    return Command(
        command_id=command_id or f"{kind.value}-{instance_id}",
        cluster="demo.k8s.local",
        kind=kind,
        instance_id=instance_id,
        node_name=node_name,
        reason=reason,
        deadline=utcnow() + timedelta(seconds=seconds),
        options=options or DrainOptions(),
    )


def node_json(world: LocalWorld, name: str) -> dict[str, Any]:
    return world.rest.get(f"/api/v1/nodes/{q(name)}")


def instance_of(node: dict[str, Any]) -> str:
    parsed = parse_provider_id(node["spec"]["providerID"])
    assert parsed is not None
    return parsed[1]


def workers(world: LocalWorld) -> list[dict[str, Any]]:
    nodes = world.rest.get("/api/v1/nodes")["items"]
    return sorted(
        (n for n in nodes if "node-role.kubernetes.io/node" in n["metadata"].get("labels", {})),
        key=lambda n: n["metadata"]["name"],
    )


def non_daemonset_pods(world: LocalWorld, node: str) -> list[dict[str, Any]]:
    out = []
    for pod in pods_on_node(world.rest, node):
        owners = pod["metadata"].get("ownerReferences") or []
        if not any(o.get("kind") == "DaemonSet" for o in owners):
            out.append(pod)
    return out


def node_events(world: LocalWorld, node: str) -> list[dict[str, Any]]:
    items = world.rest.get("/api/v1/namespaces/default/events", fieldSelector=f"involvedObject.name={node}")["items"]
    return [e for e in items if e.get("source", {}).get("component") == "aws-node-manager"]


class ReadyMonitor:
    """Samples, every few milliseconds, how many pods of each app are Ready and not terminating (what a
    PodDisruptionBudget counts as healthy) and keeps the minimum seen."""

    def __init__(self, rest: KubeRest, namespace: str) -> None:
        self.rest = rest
        self.namespace = namespace
        self.minimum: dict[str, int] = {}
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            pods = self.rest.get(f"/api/v1/namespaces/{q(self.namespace)}/pods")["items"]
            counts: dict[str, int] = defaultdict(int)
            for pod in pods:
                if is_live(pod) and pod_ready(pod):
                    counts[pod["metadata"]["labels"].get("app", "")] += 1
            for app in set(counts) | set(self.minimum):
                self.minimum[app] = min(self.minimum.get(app, counts[app]), counts[app])
            self.samples += 1
            self._stop.wait(0.005)

    def __enter__(self) -> ReadyMonitor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


def outcome(result: NodeCommandResult, name_prefix: str) -> list[Any]:
    return [p for p in result.pods if p.name.startswith(name_prefix)]
