"""What the wave benchmark (``bench.wave``) records of one wave: ``WaveResult``, its times and counts, and
``Recorder``, the watches on Nodes (each first cordon) and on the benchmark's Pods (each binding, deletion and
removal) they are taken from.

Split from ``bench.wave`` so each module stays under the project's 400 lines; its module docstring says what the
benchmark measures.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field

from kubernetes import client as k8s
from kubernetes import watch

NAMESPACE = "bench"  # the namespace of the benchmark's workloads (``bench.wave``)


@dataclass
class WaveResult:
    """One wave; times in seconds from the first handler call."""

    size: int
    calls_span: float = 0.0  # first to last handler call
    last_cordon: float = math.inf
    last_drain: float = math.inf
    before_deadline: int = 0
    terminal: int = 0
    onto_warned: int = 0  # bound to a node after its handler call started (by revision)
    onto_commanded: int = 0  # bound to a node after its handler call returned (its drain command was queued)
    onto_cordoned: int = 0  # bound to a node after its cordon (the scheduler's placement, not the agent's delay)
    onto_schedulable: int = 0  # bound after its command was queued and before its cordon: the agent's delay
    seen_after_warned: int = 0  # the earlier count: bindings the watch delivered after the handler call started
    seen_after_commanded: int = 0  # ... after it returned
    onto: list[str] = field(default_factory=list)  # each binding counted in onto_warned: pod, node, when, revisions
    statuses: dict[str, int] = field(default_factory=dict)

    @property
    def cordon_after_last_call(self) -> float:
        return self.last_cordon - self.calls_span


class Recorder:
    """Watches Nodes (first time each is unschedulable) and Pods of ``NAMESPACE`` (each binding), in threads."""

    def __init__(self, core: k8s.CoreV1Api) -> None:
        self.core = core
        self.cordoned: dict[str, float] = {}
        self.cordoned_rv: dict[str, int] = {}
        self.deleting: dict[str, float] = {}  # pod name -> first time a deletionTimestamp was seen
        self.gone: dict[str, float] = {}
        self.bindings: list[tuple[float, str, str, int, str]] = []  # (time seen, pod uid, node, revision, name)
        self.known: set[str] = set()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> Recorder:
        nodes = self.core.list_node()
        pods = self.core.list_namespaced_pod(NAMESPACE)
        self.known = set()
        for p in pods.items:
            assert p.metadata is not None and p.metadata.uid is not None  # the API server sets both
            self.known.add(p.metadata.uid)
        assert nodes.metadata is not None and pods.metadata is not None  # a list carries the revision it was read at
        for target, rv in (
            (self._nodes, nodes.metadata.resource_version),
            (self._pods, pods.metadata.resource_version),
        ):
            thread = threading.Thread(target=target, args=(rv,), daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stop.set()

    def _nodes(self, rv: str) -> None:
        while not self._stop.is_set():
            w = watch.Watch()  # type: ignore[no-untyped-call]  # kubernetes client: watch.Watch has no annotations
            events = w.stream(  # type: ignore[no-untyped-call]  # kubernetes client: watch.Watch has no annotations
                self.core.list_node, resource_version=rv, timeout_seconds=5
            )
            for event in events:
                node = event["object"]
                rv = node.metadata.resource_version
                if node.spec.unschedulable and node.metadata.name not in self.cordoned:
                    self.cordoned[node.metadata.name] = time.time()
                    self.cordoned_rv[node.metadata.name] = int(rv)
                if self._stop.is_set():
                    w.stop()  # type: ignore[no-untyped-call]  # kubernetes client: watch.Watch has no annotations

    def _pods(self, rv: str) -> None:
        while not self._stop.is_set():
            w = watch.Watch()  # type: ignore[no-untyped-call]  # kubernetes client: watch.Watch has no annotations
            events = w.stream(  # type: ignore[no-untyped-call]  # kubernetes client: watch.Watch has no annotations
                self.core.list_namespaced_pod, NAMESPACE, resource_version=rv, timeout_seconds=5
            )
            for event in events:
                pod = event["object"]
                rv = pod.metadata.resource_version
                now = time.time()
                if pod.spec.node_name and pod.metadata.uid not in self.known:
                    self.known.add(pod.metadata.uid)
                    self.bindings.append((now, pod.metadata.uid, pod.spec.node_name, int(rv), pod.metadata.name))
                if pod.metadata.deletion_timestamp is not None:
                    self.deleting.setdefault(pod.metadata.name, now)
                if event["type"] == "DELETED":
                    self.gone.setdefault(pod.metadata.name, now)
                if self._stop.is_set():
                    w.stop()  # type: ignore[no-untyped-call]  # kubernetes client: watch.Watch has no annotations
