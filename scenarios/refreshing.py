"""The refresher on the local world, wired as in AWS: shared by the ``refresh`` scenario, the refresher's
integration tests and its benchmark.

What runs for real: the refresher's handler (in this process, through ``LocalInvoker``: concurrent "execution
environments", invoked asynchronously for events as EventBridge does), the agent (``python -m agent``, its own
process and Kubernetes identity), moto's Auto Scaling, kube-apiserver + etcd with the simulator playing kubelets
and controllers, and ``localworld.eventbus`` playing EventBridge: the agent's result events and Auto Scaling's
"EC2 Instance Launch Successful" reach the handler as the stack's rules route them. The tick is not pumped unless a
caller asks (advancement must come from events).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from aws_lambda_powertools import Metrics

from adapters.dynamo.runs import RunStore
from adapters.dynamo.store import Store
from core.runs import Run
from core.settings import RefresherSettings
from lambdas.refresher.handler import Deps
from localworld.cluster import ClusterInfo
from localworld.eventbus import EventBus
from localworld.refresher_invoker import LocalInvoker
from localworld.world import LocalWorld, Spawned

T = TypeVar("T")

# Short timings so that a run on the local world takes seconds (the defaults are for AWS).
AGENT_ENV = {
    "SQS_WAIT_SECONDS": "1",
    "SQS_VISIBILITY_TIMEOUT_SECONDS": "5",
    "STALE_RUNNING_SECONDS": "6",
    "MEMBERSHIP_RESYNC_SECONDS": "5",
    "EVICTION_BACKOFF_SECONDS": "0.2",
    "EVICTION_BACKOFF_MAX_SECONDS": "0.5",
    "AGENT_SHUTDOWN_GRACE_SECONDS": "2",
    "LEADER_ELECTION": "false",
    "AGENT_HTTP_PORT": "0",
    "AGENT_CLOUDWATCH_METRICS": "false",
    "AGENT_CONCURRENCY": "8",
}
REFRESHER_ENV = {
    "REFRESH_WAIT_BUDGET_SECONDS": "5",
    "REFRESH_POLL_SECONDS": "0.1",
    "REFRESH_EVENT_WAIT_POLL_SECONDS": "2",  # the safety net under the events (20 s in AWS), scaled as the rest
    "REFRESH_MASTER_SETTLE_SECONDS": "0.5",
    "REFRESH_EFFECT_GRACE_SECONDS": "3",
    "REFRESH_AGENT_GRACE_SECONDS": "20",
    "REFRESH_REQUEST_MIN_DRAIN_TIMEOUT_SECONDS": "10",  # the local world's drains are short (a few pods, no grace)
    "POWERTOOLS_SERVICE_NAME": "refresher",
}
WORKER_LABEL = "node-role.kubernetes.io/node"


def wait_until(predicate: Callable[[], T], timeout: float, what: str, interval: float = 0.1) -> T:
    """Poll ``predicate`` until truthy; ``TimeoutError`` naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def ready_workers(world: LocalWorld) -> int:
    """Worker nodes whose Ready condition is True (from the simulator's informer cache)."""
    count = 0
    for node in world.running_simulator().nodes():
        if WORKER_LABEL not in node["metadata"].get("labels", {}):
            continue
        if any(c["type"] == "Ready" and c["status"] == "True" for c in node.get("status", {}).get("conditions", [])):
            count += 1
    return count


class ReadyGuard(threading.Thread):
    """Samples the number of Ready worker nodes every ``interval`` s; keeps the minimum and when it was seen."""

    def __init__(self, world: LocalWorld, interval: float = 0.05) -> None:
        super().__init__(name="ready-guard", daemon=True)
        self.world = world
        self.interval = interval
        self.halt = threading.Event()
        self.start_count = ready_workers(world)
        self.minimum = self.start_count
        self.samples = 0

    def run(self) -> None:
        while not self.halt.wait(self.interval):
            count = ready_workers(self.world)
            self.samples += 1
            self.minimum = min(self.minimum, count)

    def stop(self) -> None:
        self.halt.set()
        self.join(5)


class RefreshHarness:
    """The refresher, the agent and the event pump on a cluster of ``world``.

    Args:
        world: a started ``LocalWorld`` with ``setup_cluster`` done.
        info: the cluster.
        refresher_env: more ``RefresherSettings`` variables (over ``REFRESHER_ENV``).
        agent_env: more agent variables (over ``AGENT_ENV``).
        concurrency: the function's concurrent execution environments.
        log_dir: where the agent's log goes (default: the world's).
        deps_hook: wraps each ``Deps`` built (tests inject faults through it).
        watch_asgs: the event pump announces new ASG instances ("EC2 Instance Launch Successful", a
            DescribeAutoScalingGroups every pump); no rule routes them to the refresher, so a caller that does not
            look at them (the benchmark) turns it off and spares moto the calls.
    """

    def __init__(
        self,
        world: LocalWorld,
        info: ClusterInfo,
        *,
        refresher_env: Mapping[str, str] | None = None,
        agent_env: Mapping[str, str] | None = None,
        concurrency: int = 4,
        log_dir: Path | None = None,
        deps_hook: Callable[[Deps], Deps] | None = None,
        watch_asgs: bool = True,
    ) -> None:
        self.world = world
        self.info = info
        self.env = {**info.env(), **REFRESHER_ENV, **(refresher_env or {})}
        self.settings: RefresherSettings = RefresherSettings.from_env(self.env)
        self.agent_env = {**AGENT_ENV, **(agent_env or {})}
        self.log_dir = log_dir
        self.store = Store(world.resource("dynamodb").Table(info.table_name), info.name)
        self.runs = RunStore(self.store)
        self.deps_hook = deps_hook
        self.invoker = LocalInvoker(self._make_deps, concurrency=concurrency)
        self.bus = EventBus(world.session, observer_queue_url=info.observer_queue_url, watch_asgs=watch_asgs)
        self.agent: Spawned | None = None

    def _make_deps(self) -> Deps:
        deps = Deps.from_session(
            self.settings, self.world.session, metrics=Metrics(namespace="NodeManager", service="refresher")
        )
        return self.deps_hook(deps) if self.deps_hook else deps

    def start(self, membership_timeout: float = 30.0) -> RefreshHarness:
        """Spawn the agent, wait until it reported every node, start the event pump."""
        log = self.log_dir / "agent.log" if self.log_dir else None
        self.agent = self.world.spawn("agent", env_overrides=self.agent_env, log_path=log)
        expected = len(self.world.running_simulator().nodes())
        wait_until(
            lambda: len(self.store.list_nodes(600)) >= expected, membership_timeout, "the agent to report membership"
        )
        self.invoker.subscribe(self.bus)
        self.bus.baseline()
        self.bus.start(interval=0.1)
        return self

    def stop(self) -> None:
        self.bus.stop()
        self.invoker.settle(10)
        self.invoker.close()
        if self.agent is not None:
            self.agent.stop()

    def invoke(self, payload: dict[str, Any]) -> dict[str, Any]:
        """A manual invocation (``aws lambda invoke``), synchronous."""
        return self.invoker.invoke(payload)

    def refresh(self, **fields: Any) -> dict[str, Any]:
        return self.invoke({"action": "refresh", "cluster": self.info.name, **fields})

    def run(self, run_id: str) -> Run:
        run = self.runs.get(run_id)
        assert run is not None, f"no run {run_id}"
        return run

    def wait_run(
        self, run_id: str, timeout: float, status: Callable[[Run], bool] | None = None, interval: float = 0.1
    ) -> Run:
        """Wait until the run is over (or ``status(run)`` holds), reading its item every ``interval`` seconds."""
        check = status or (lambda r: not r.status.active)

        def over() -> Run | None:
            current = self.run(run_id)
            return current if check(current) else None

        found = wait_until(over, timeout, f"run {run_id}", interval)
        assert found is not None  # wait_until returns only a truthy value
        return found

    def groups(self) -> dict[str, dict[str, Any]]:
        """The cluster's ASGs as DescribeAutoScalingGroups says now, by name."""
        out = self.world.client("autoscaling").describe_auto_scaling_groups()["AutoScalingGroups"]
        return {g["AutoScalingGroupName"]: g for g in out if g["AutoScalingGroupName"] in self.info.all_asgs}

    def running_instances(self) -> set[str]:
        """Every pending or running EC2 instance (inside a group or not)."""
        ec2 = self.world.client("ec2")
        out = ec2.describe_instances(Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}])
        return {i["InstanceId"] for r in out["Reservations"] for i in r["Instances"]}
