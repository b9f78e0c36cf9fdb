"""The simulator itself: informers, the EC2 poller and one reconcile loop running the controllers.

Every informer change wakes one reconcile pass that snapshots the caches into a ``View``, lets each controller plan its
writes (nodes, kubelet, ReplicaSet, DaemonSet, scheduler, garbage collector, disruption, in that order) and runs them
concurrently on a pool; the simulator's own writes go into the caches at once (newer resourceVersion wins), so a pass
never acts twice on the same fact. See ``localworld.simulator`` for what each controller plays.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any, TypeVar

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from localworld.rest import JSON, KubeRest
from localworld.simulator.base import Action, Controller, Recent, Shared, View
from localworld.simulator.daemonset import DaemonSetController
from localworld.simulator.disruption import DisruptionController
from localworld.simulator.gc import GarbageCollector
from localworld.simulator.informer import Informer
from localworld.simulator.kubelet import Kubelet
from localworld.simulator.nodes import NodeLifecycle
from localworld.simulator.objects import PATHS, node_ready
from localworld.simulator.pods import PodWriter
from localworld.simulator.replicaset import ReplicaSetController
from localworld.simulator.scheduler import Scheduler, node_load

log = logging.getLogger(__name__)

T = TypeVar("T")


class ClusterSimulator:
    """Background threads playing kubelet, scheduler and controllers for one kOps cluster (see package doc).

    Args:
        ec2_client: boto3 EC2 client (moto); used only by the simulator's EC2 thread.
        api_client: ``kubernetes.client.ApiClient`` with admin rights and a connection pool of >= 32.
        cluster_name: the ``KubernetesCluster`` tag value whose instances become Nodes.
        node_naming: ``"dns"`` (private DNS name, ``ip-10-0-0-5.ec2.internal``) or ``"id"`` (instance id), the two
            ways kOps names nodes.
        interval: seconds between reconcile passes when nothing wakes the loop earlier (<= 0.05 keeps it quick).
        ec2_interval: seconds between DescribeInstances polls.
        join_delay: seconds between the simulator first seeing an instance and its Node registering.
        workers: concurrent API writes per pass.

    Raises:
        ValueError: ``node_naming`` is neither ``"dns"`` nor ``"id"``.
    """

    def __init__(
        self,
        ec2_client: Any,
        api_client: ApiClient,
        cluster_name: str,
        *,
        node_naming: str = "dns",
        interval: float = 0.05,
        ec2_interval: float = 0.2,
        join_delay: float = 0.0,
        workers: int = 16,
    ) -> None:
        if node_naming not in ("dns", "id"):
            raise ValueError("node_naming must be 'dns' or 'id'")
        self.rest = KubeRest(api_client)
        self.interval = interval
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._informers = {name: Informer(self.rest, name, self._wake.set, self._stop) for name in PATHS}
        shared = Shared(
            rest=self.rest,
            informers=self._informers,
            pod_writer=PodWriter(self.rest, self._informers["pods"]),
            recent=Recent(),
        )
        self._nodes = NodeLifecycle(
            shared,
            ec2_client,
            cluster_name,
            node_naming=node_naming,
            ec2_interval=ec2_interval,
            join_delay=join_delay,
        )
        # Planning order matters: ReplicaSets place their new pods before the scheduler binds the rest.
        self._controllers: tuple[Controller, ...] = (
            self._nodes,
            Kubelet(shared),
            ReplicaSetController(shared),
            DaemonSetController(shared),
            Scheduler(shared),
            GarbageCollector(shared),
            DisruptionController(shared),
        )
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="simulator-write")
        self._threads: list[threading.Thread] = []
        self._passes = 0
        self._idle_passes = 0
        self._last_actions = -1
        self.errors = 0
        self._started = False

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> ClusterSimulator:
        """Start the informers, the EC2 poller and the reconcile loop. Idempotent."""
        if self._started:
            return self
        self._started = True
        for informer in self._informers.values():
            informer.start()
        targets: tuple[tuple[Callable[[], None], str], ...] = (
            (lambda: self._nodes.poll_ec2(self._stop, self._wake, self._count_error), "simulator-ec2"),
            (self._loop, "simulator-reconcile"),
        )
        for target, name in targets:
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop all threads; returns once the reconcile loop made its last write (at most ``timeout`` s)."""
        self._stop.set()
        self._wake.set()
        for informer in self._informers.values():
            informer.close()
        for thread in self._threads:
            thread.join(timeout)
        self._pool.shutdown(wait=True, cancel_futures=True)
        for informer in self._informers.values():
            informer.thread.join(0.5)

    def __enter__(self) -> ClusterSimulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def never_join(self, instance_id: str) -> None:
        """The instance never gets a Node (a node that fails to join)."""
        self._nodes.never_join(instance_id)
        self._wake.set()

    def allow_join(self, instance_id: str) -> None:
        """Undo ``never_join``: the instance's Node registers on the next pass."""
        self._nodes.allow_join(instance_id)
        self._wake.set()

    @property
    def join_delay(self) -> float:
        """Seconds between the simulator first seeing an instance and its Node registering (settable while running)."""
        return self._nodes.join_delay

    @join_delay.setter
    def join_delay(self, seconds: float) -> None:
        self._nodes.join_delay = seconds

    # ------------------------------------------------------------------ cache views
    def nodes(self) -> list[JSON]:
        """Nodes as the simulator's cache has them (dicts as the API returns them)."""
        return list(self._informers["nodes"].snapshot().values())

    def pods(self, namespace: str | None = None) -> list[JSON]:
        pods = self._informers["pods"].snapshot().values()
        return [p for p in pods if namespace is None or p["metadata"]["namespace"] == namespace]

    def pdbs(self, namespace: str | None = None) -> list[JSON]:
        pdbs = self._informers["pdbs"].snapshot().values()
        return [p for p in pdbs if namespace is None or p["metadata"]["namespace"] == namespace]

    def node_for_instance(self, instance_id: str) -> JSON | None:
        for node in self.nodes():
            if (node.get("spec") or {}).get("providerID", "").endswith(f"/{instance_id}"):
                return node
        return None

    @property
    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self._informers.values()) and self._nodes.instances is not None

    # ------------------------------------------------------------------ waits
    def wait_for(self, predicate: Callable[[], T], timeout: float, what: str, poll: float = 0.02) -> T:
        """Call ``predicate`` every ``poll`` s until it returns a truthy value, and return that value.

        Raises:
            TimeoutError: still falsy after ``timeout`` seconds; the message names ``what``.
        """
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() >= deadline:
                raise TimeoutError(f"timed out after {timeout:.1f} s waiting for {what}")
            time.sleep(poll)

    def nodes_ready(self, n: int, timeout: float = 30.0) -> list[JSON]:
        """Wait until at least ``n`` Nodes are Ready (in the cache); return the Ready nodes.

        Raises:
            TimeoutError: fewer than ``n`` after ``timeout`` seconds.
        """

        def ready() -> list[JSON]:
            nodes = [node for node in self.nodes() if node_ready(node)]
            return nodes if len(nodes) >= n else []

        return self.wait_for(ready, timeout, f"{n} Ready nodes")

    def wait_settled(self, timeout: float = 10.0) -> None:
        """Wait until two reconcile passes in a row found nothing to do (after this call).

        Raises:
            TimeoutError: the world kept changing for ``timeout`` seconds.
        """
        start = self._passes
        self.wait_for(lambda: self._passes >= start + 2 and self._idle_passes >= 2, timeout, "the simulator to settle")

    # ------------------------------------------------------------------ loop
    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.interval)
            self._wake.clear()
            if self._stop.is_set():
                return
            if not self.synced:
                continue
            try:
                actions = self._plan()
                if actions:
                    futures = [self._pool.submit(self._run_action, name, fn) for name, fn in actions]
                    wait(futures)
                    self._wake.set()  # look again at once: our writes may enable more work
                self._idle_passes = 0 if actions else self._idle_passes + 1
                self._last_actions = len(actions)
            except Exception:
                if self._stop.is_set():
                    return
                self.errors += 1
                log.exception("simulator pass failed")
                self._idle_passes = 0
            self._passes += 1

    def _run_action(self, name: str, fn: Callable[[], None]) -> None:
        if self._stop.is_set():
            return
        try:
            fn()
        except ApiException as err:
            if err.status in (404, 409):
                log.debug("%s: %s %s", name, err.status, err.reason)
            else:
                self.errors += 1
                log.warning("%s failed: %s %s %s", name, err.status, err.reason, (err.body or "")[:300])
        except Exception:
            if not self._stop.is_set():
                self.errors += 1
                log.exception("%s failed", name)

    def _count_error(self) -> None:
        self.errors += 1

    def _plan(self) -> list[Action]:
        nodes = self._informers["nodes"].snapshot()
        pods = self._informers["pods"].snapshot()
        by_node = {n["metadata"]["name"]: n for n in nodes.values()}
        view = View(
            nodes=by_node,
            pods=pods,
            rsets=self._informers["replicasets"].snapshot(),
            dsets=self._informers["daemonsets"].snapshot(),
            deploys=self._informers["deployments"].snapshot(),
            pdbs=self._informers["pdbs"].snapshot(),
            load=node_load(pods, by_node),
        )
        actions: list[Action] = []
        for controller in self._controllers:
            controller.plan(view, actions)
        return actions
