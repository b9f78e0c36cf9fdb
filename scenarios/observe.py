"""Watchers a scenario runs beside the system under test: they see what happened and when, and judge it.

They only read (the Kubernetes API as admin, moto, the state table); none of them takes part in the work.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from kubernetes import client as k8s
from kubernetes import watch

from localworld.workloads import list_pdbs
from scenarios.timeline import Timeline


class _Loop(threading.Thread):
    """A daemon thread running ``step`` every ``interval`` seconds until ``stop``; errors are kept, not raised."""

    def __init__(self, name: str, interval: float) -> None:
        super().__init__(name=name, daemon=True)
        self.interval = interval
        self.halt = threading.Event()
        self.errors: list[str] = []

    def step(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def run(self) -> None:
        while not self.halt.is_set():
            try:
                self.step()
            except Exception as err:  # noqa: BLE001 - a watcher must outlive a failed read
                self.errors.append(f"{type(err).__name__}: {err}")
            self.halt.wait(self.interval)

    def stop(self) -> None:
        self.halt.set()
        self.join(5)


class NodeWatcher(threading.Thread):
    """Marks the moment a node becomes unschedulable (cordoned), and by whom (our annotation or not)."""

    def __init__(
        self, api: k8s.ApiClient, node_name: str, timeline: Timeline, annotation: str = "node-manager.aws/cordoned-by"
    ) -> None:
        super().__init__(name=f"watch-node-{node_name}", daemon=True)
        self.core = k8s.CoreV1Api(api)
        self.node_name = node_name
        self.timeline = timeline
        self.annotation = annotation
        self.cordoned_at: float | None = None
        self.cordoned_by: str | None = None
        self.deleted_at: float | None = None
        self._watch = watch.Watch()  # type: ignore[no-untyped-call]  # kubernetes client: Watch has no annotations

    def run(self) -> None:
        try:
            for event in self._watch.stream(  # type: ignore[no-untyped-call]  # kubernetes client: no annotations
                self.core.list_node, field_selector=f"metadata.name={self.node_name}", timeout_seconds=300
            ):
                node = event["object"]
                if event["type"] == "DELETED":
                    self.deleted_at = time.monotonic()
                    self.timeline.mark("kubernetes", f"node {self.node_name} deleted (its instance is gone)")
                    return
                if node.spec.unschedulable and self.cordoned_at is None:
                    self.cordoned_at = time.monotonic()
                    self.cordoned_by = (node.metadata.annotations or {}).get(self.annotation)
                    who = f"by command {self.cordoned_by}" if self.cordoned_by else "by someone else"
                    self.timeline.mark("agent", f"node {self.node_name} cordoned ({who})", at=self.cordoned_at)
        except Exception:  # noqa: BLE001 - the watch ends with the world
            return

    def stop(self) -> None:
        self._watch.stop()  # type: ignore[no-untyped-call]  # kubernetes client: watch.Watch has no annotations


class PdbGuard(_Loop):
    """Invariant 5: checks every few milliseconds that no PodDisruptionBudget has fewer healthy pods than it
    demands (``status.currentHealthy >= status.desiredHealthy``, as the disruption controller computes them)."""

    def __init__(self, api: k8s.ApiClient, namespace: str, interval: float = 0.02) -> None:
        super().__init__("pdb-guard", interval)
        self.api = api
        self.namespace = namespace
        self.violations: list[str] = []
        self.samples = 0

    def step(self) -> None:
        for pdb in list_pdbs(self.api, self.namespace):
            status = pdb.get("status") or {}
            if "desiredHealthy" not in status:
                continue
            self.samples += 1
            if status.get("currentHealthy", 0) < status["desiredHealthy"]:
                self.violations.append(
                    f"{pdb['metadata']['name']}: {status.get('currentHealthy')} healthy < "
                    f"{status['desiredHealthy']} desired"
                )


class AsgWatcher(_Loop):
    """Marks instances joining or leaving an ASG, and its desired capacity changing."""

    def __init__(self, autoscaling: Any, asg_name: str, timeline: Timeline, interval: float = 0.1) -> None:
        super().__init__(f"watch-asg-{asg_name}", interval)
        self.autoscaling = autoscaling
        self.asg_name = asg_name
        self.timeline = timeline
        self.instances: set[str] | None = None
        self.desired: int | None = None
        self.launched: dict[str, float] = {}

    def step(self) -> None:
        groups = self.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[self.asg_name])
        group = groups["AutoScalingGroups"][0]
        now = {i["InstanceId"] for i in group["Instances"]}
        if self.instances is not None:
            for iid in sorted(now - self.instances):
                self.launched[iid] = time.monotonic()
                self.timeline.mark("asg", f"{self.asg_name} launched replacement {iid}")
            for iid in sorted(self.instances - now):
                self.timeline.mark("asg", f"{iid} left {self.asg_name}")
        if self.desired is not None and group["DesiredCapacity"] != self.desired:
            self.timeline.mark("asg", f"desired capacity {self.desired} -> {group['DesiredCapacity']}")
        self.instances, self.desired = now, group["DesiredCapacity"]


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, poll: float = 0.02) -> Any:
    """Poll ``predicate`` until it returns something truthy; raise ``TimeoutError`` naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(poll)
