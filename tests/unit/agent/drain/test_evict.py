"""The drain's evictions on threads (``agent.drain.evict.Evictor``) against a fake Kubernetes API that answers an
eviction only after the watch delivered the pod's DELETED event, the order two threads and one inbox allow and the
local world produced now and then (a grace-0 deletion's event beating the worker's answer)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator

from agent.drain.evict import Evictor
from agent.drain.policy import GraceSource, plan_drain
from agent.drain.progress import DrainProgress, counts_text
from agent.drain.results import Durations
from agent.kube.eviction import EvictionResponse, EvictionStatus
from agent.kube.views import NodeView, OwnerRef, PodEvent, PodView
from core.clock import Deadline, SystemClock
from core.model import DrainOptions

POD = PodView(
    namespace="ns",
    name="web",
    uid="u1",
    node_name="n1",
    phase="Running",
    owners=(OwnerRef("ReplicaSet", "rs", True),),
    termination_grace_period_seconds=600,  # longer than the deadline: the eviction's grace is capped
)


class Watch:
    """A pod watch fed by the fake API; each ``__next__`` after the first says the previous event was handed on."""

    def __init__(self, events: queue.Queue[PodEvent | None], handed_on: threading.Event) -> None:
        self.events = events
        self.handed_on = handed_on
        self.yielded = False
        self.closed = False

    def __iter__(self) -> Iterator[PodEvent]:
        return self

    def __next__(self) -> PodEvent:
        if self.yielded:  # the watcher came back for more: the last event is on the drain's inbox
            self.handed_on.set()
        while not self.closed:
            try:
                event = self.events.get(timeout=0.05)
            except queue.Empty:
                continue
            if event is None:
                break
            self.yielded = True
            return event
        raise StopIteration

    def close(self) -> None:
        self.closed = True


class EventFirst:
    """Accepts the eviction, but answers only once the watch handed the pod's DELETED event to the drain."""

    def __init__(self) -> None:
        self.events: queue.Queue[PodEvent | None] = queue.Queue()
        self.handed_on = threading.Event()
        self.sent: list[int | None] = []

    def list_pods_on_node(self, node_name: str) -> tuple[list[PodView], str]:
        return [POD], "1"

    def watch_pods_on_node(self, node_name: str, resource_version: str, timeout_seconds: int) -> Watch:
        return Watch(self.events, self.handed_on)

    def evict_pod(
        self, namespace: str, name: str, uid: str | None = None, grace_period_seconds: int | None = None
    ) -> EvictionResponse:
        self.sent.append(grace_period_seconds)
        self.events.put(PodEvent("DELETED", POD, resource_version="2"))
        assert self.handed_on.wait(10), "the watcher never handed the event on"
        return EvictionResponse(EvictionStatus.EVICTED, 201)

    def delete_pod(
        self, namespace: str, name: str, uid: str | None = None, grace_period_seconds: int | None = None
    ) -> bool:
        raise AssertionError("nothing is deleted here")


def test_a_pod_whose_deleted_event_beats_the_eviction_answer_is_named_with_its_capped_grace() -> None:
    clock = SystemClock()
    kube = EventFirst()
    evictor = Evictor(kube, clock, 0.1, 1.0, lambda: 0.5, 4, threading.BoundedSemaphore(4), grace_margin=10.0)
    progress = DrainProgress(plan_drain([POD], DrainOptions()))
    node = NodeView(name="n1", provider_id="aws:///us-east-1a/i-0123456789abcdef0", labels={}, ready=True)
    evictor.evict_and_wait(node, DrainOptions(), Deadline(clock, 60), progress, "1", Durations())
    assert progress.settled
    assert kube.sent and kube.sent[0] is not None and kube.sent[0] <= 50
    state = progress.states["ns/web"]
    assert state.grace is not None and state.grace.source == GraceSource.DEADLINE
    assert "1 with grace capped by the deadline" in counts_text(progress)
