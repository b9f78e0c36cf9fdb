"""The drain's evictions: every tracked pod evicted (or deleted) in parallel, each retried with backoff, while
the watcher reports which are gone, until the drain is settled or its deadline passed.

Each pod has its own worker thread (at most ``max_workers`` per drain); requests in flight are bounded over all
drains by the engine's ``request_slots``. A pod the watch sees arrive on the node after the drain listed it (placed
by a scheduler that had not seen the cordon yet, ``DrainProgress.arrival``) is evicted too. Workers and the watcher
post to one inbox that only the drain's own thread reads, so ``DrainProgress`` needs no lock.

Each request's grace period is decided when it is sent (``agent.drain.policy.grace_for``): capped so the pod's
shutdown ends ``grace_margin`` seconds before the deadline. With ``pdb_delete`` (a deadline-bound drain under
``DRAIN_PDB_DEADLINE_POLICY=delete``) a pod a PodDisruptionBudget still refuses is DELETEd once its grace stops
fitting (``seconds_until_pdb_delete``), with the grace that remains (``grace_past_pdb``).
"""

from __future__ import annotations

import contextvars
import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from agent.drain.attempts import EvictionAttempts, send
from agent.drain.policy import GraceSource, PodAction
from agent.drain.ports import EvictionApi
from agent.drain.progress import DrainProgress, EvictionUpdate
from agent.drain.results import Durations
from agent.drain.watcher import PodWatcher
from agent.kube.views import NodeView, PodView
from core.clock import Clock, Deadline
from core.model import DrainOptions

log = logging.getLogger(__name__)


class Evictor:
    """Evicts the pods of one engine's drains (see the module docstring).

    Args:
        kube: the Kubernetes adapter (``evict_pod``, ``delete_pod`` and the watcher's pod reads).
        clock: time source.
        backoff_base, backoff_cap: eviction backoff in seconds (``core.clock.backoff_delay``).
        rand: jitter source in [0, 1).
        max_workers: pods evicted in parallel per drain.
        request_slots: bounds eviction/delete requests in flight over all drains.
        grace_margin: seconds a capped grace period leaves before the deadline (``DRAIN_GRACE_MARGIN_SECONDS``).
    """

    def __init__(
        self,
        kube: EvictionApi,
        clock: Clock,
        backoff_base: float,
        backoff_cap: float,
        rand: Callable[[], float],
        max_workers: int,
        request_slots: threading.BoundedSemaphore,
        grace_margin: float = 10.0,
    ) -> None:
        self.kube = kube
        self.clock = clock
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.rand = rand
        self.max_workers = max_workers
        self._request_slots = request_slots
        self.grace_margin = grace_margin

    def evict_and_wait(
        self,
        node: NodeView,
        options: DrainOptions,
        deadline: Deadline,
        progress: DrainProgress,
        resource_version: str,
        durations: Durations,
        pdb_delete: bool | Callable[[], bool] = False,
    ) -> None:
        """Evict (or delete) the tracked pods in parallel and wait, on a watch, until each is gone, its
        eviction gave up, or the deadline passed. ``pdb_delete``: delete pods still refused by a
        PodDisruptionBudget when their grace stops fitting before the deadline (see the module docstring); a
        callable is asked at each refusal (a drain becomes deadline-bound when a Spot warning tightens it)."""
        inbox: queue.Queue[tuple[str, Any]] = queue.Queue()
        deadline.on_tighten(lambda: inbox.put(("deadline", None)))  # wake up: the wait below uses the new deadline
        stop = threading.Event()
        watcher = PodWatcher(self.kube, node.name, resource_version, deadline, inbox, stop, self.clock)
        watcher.start()
        todo = [
            s
            for s in progress.states.values()
            if s.disposition.action in (PodAction.EVICT, PodAction.DELETE) and not (s.gone or s.worker_done)
        ]  # a second call (``DrainEngine._keep_cordoned``) sends nothing for pods already gone or given up on
        # threads are started as needed: an arrival after the cordon (``DrainProgress.arrival``) gets one too
        pool = ThreadPoolExecutor(max_workers=self.max_workers, thread_name_prefix="evict")
        t_evict = self.clock.monotonic()
        try:
            for state in todo:
                # each worker runs in a copy of this thread's context: its log lines carry the command's fields
                pool.submit(
                    contextvars.copy_context().run,
                    self._evict_until_done,
                    state.pod,
                    state.disposition.action,
                    options,
                    deadline,
                    stop,
                    inbox,
                    pdb_delete,
                )
            evictions_done_at: float | None = None
            while not progress.settled:
                wait = deadline.remaining()
                if wait <= 0:
                    break
                try:
                    kind, payload = inbox.get(timeout=wait)
                except queue.Empty:
                    break
                if kind == "update":
                    progress.apply_update(payload)
                elif kind == "event":
                    progress.apply_event(payload)
                    arrived = progress.arrival(payload, options)
                    if arrived is not None:  # placed on the node after its cordon: it leaves with the others
                        log.info("pod %s arrived on %s after its cordon: evicting it too", arrived.pod.key, node.name)
                        pool.submit(
                            contextvars.copy_context().run,
                            self._evict_until_done,
                            arrived.pod,
                            PodAction.EVICT,
                            options,
                            deadline,
                            stop,
                            inbox,
                            pdb_delete,
                        )
                elif kind == "snapshot":
                    progress.apply_snapshot(payload)
                elif kind == "watch_error":
                    log.warning("pod watch on %s: %s", node.name, payload)
                if evictions_done_at is None and progress.evictions_done:
                    evictions_done_at = self.clock.monotonic()
            end = self.clock.monotonic()
            if evictions_done_at is None:
                evictions_done_at = end
            durations.evict = evictions_done_at - t_evict
            durations.wait = max(0.0, end - evictions_done_at)
        finally:
            stop.set()
            watcher.stop()
            pool.shutdown(wait=False, cancel_futures=True)

    def _evict_until_done(
        self,
        pod: PodView,
        action: PodAction,
        options: DrainOptions,
        deadline: Deadline,
        stop: threading.Event,
        inbox: queue.Queue[tuple[str, Any]],
        pdb_delete: bool | Callable[[], bool] = False,
    ) -> None:
        """One pod's eviction (or deletion) with retries (``EvictionAttempts``: when to retry, when to give up,
        when to delete past a budget); reports every answer on ``inbox``. Never raises."""
        tries = EvictionAttempts(pod, action, options, self.backoff_base, self.backoff_cap, self.grace_margin)
        try:
            while not stop.is_set():
                if deadline.expired:
                    inbox.put(("update", tries.expired()))
                    return
                with self._request_slots:
                    request = tries.request(deadline.remaining())
                    if request.grace is not None and request.grace.source == GraceSource.PDB_DEADLINE:
                        log.info(
                            "deleting %s past its PodDisruptionBudget: %.1f s before the deadline, grace %d s",
                            pod.key,
                            deadline.remaining(),
                            request.grace.seconds,
                        )
                    if request.grace is not None:  # before the DELETED event the request may cause
                        inbox.put(("update", tries.sending(request, self.clock.now())))
                    response = send(self.kube, pod, request)
                deletes = pdb_delete() if callable(pdb_delete) else pdb_delete
                update, delay = tries.answer(
                    request, response, self.clock.now(), deadline.remaining, deletes, self.rand
                )
                inbox.put(("update", update))
                if delay is None:
                    return
                if self.clock.sleep(min(delay, deadline.remaining()), stop):
                    return
        except Exception as err:
            log.exception("eviction worker for %s crashed", pod.key)
            inbox.put(
                (
                    "update",
                    EvictionUpdate(
                        pod.key, tries.attempts, None, final=True, error=f"internal error: {err}", uid=pod.uid
                    ),
                )
            )
