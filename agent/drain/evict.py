"""The drain's evictions: every tracked pod evicted (or deleted) in parallel, each retried with backoff, while
the watcher reports which are gone, until the drain is settled or its deadline passed.

Each pod has its own worker thread (at most ``max_workers`` per drain); requests in flight are bounded over all
drains by the engine's ``request_slots``. Workers and the watcher post to one inbox that only the drain's own
thread reads, so ``DrainProgress`` needs no lock.

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

from agent.drain.policy import (
    Grace,
    PodAction,
    grace_for,
    grace_past_pdb,
    seconds_until_pdb_delete,
    wanted_grace,
)
from agent.drain.ports import EvictionApi
from agent.drain.progress import DrainProgress, EvictionUpdate
from agent.drain.results import Durations
from agent.drain.watcher import PodWatcher
from agent.kube.eviction import EvictionResponse, EvictionStatus
from agent.kube.views import NodeView, PodView
from core.clock import Clock, Deadline, backoff_delay
from core.exceptions import KubernetesApiError, KubernetesRejectedError
from core.model import DrainOptions

log = logging.getLogger(__name__)

EVICTION_ERROR_RETRIES = 5  # tries of an eviction failing with a retryable error other than a PDB's 429


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
        todo = [s for s in progress.states.values() if s.disposition.action in (PodAction.EVICT, PodAction.DELETE)]
        pool = ThreadPoolExecutor(max_workers=min(self.max_workers, max(1, len(todo))), thread_name_prefix="evict")
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
        """One pod's eviction (or deletion) with retries; reports every answer on ``inbox``. Never raises.

        429 (a PodDisruptionBudget) and 500 "more than one PodDisruptionBudget" are retried with backoff until
        the deadline (or, with ``pdb_delete``, until the pod's grace stops fitting: then it is DELETEd); other
        retryable errors (5xx, connection) ``EVICTION_ERROR_RETRIES`` times; anything else gives up at once.
        """
        attempts = 0
        errors = 0
        wanted, source = wanted_grace(pod, options)
        refused_by_pdb = False
        try:
            while not stop.is_set():
                if deadline.expired:
                    inbox.put(("update", EvictionUpdate(pod.key, attempts, None, final=True)))
                    return
                attempts += 1
                grace: Grace | None = None
                with self._request_slots:
                    remaining = deadline.remaining()
                    if action == PodAction.DELETE:
                        response = self._delete(pod, options.grace_period_seconds)
                    elif refused_by_pdb and seconds_until_pdb_delete(wanted, remaining, self.grace_margin) <= 0:
                        grace = grace_past_pdb(wanted, remaining, self.grace_margin)
                        log.info(
                            "deleting %s past its PodDisruptionBudget: %.1f s before the deadline, grace %d s",
                            pod.key,
                            remaining,
                            grace.seconds,
                        )
                        response = self._delete(pod, grace.send)
                    else:
                        grace = grace_for(wanted, source, remaining, self.grace_margin)
                        response = self.kube.evict_pod(pod.namespace, pod.name, pod.uid or None, grace.send)
                now = self.clock.now()
                if response.status in (EvictionStatus.EVICTED, EvictionStatus.GONE):
                    update = EvictionUpdate(pod.key, attempts, response, final=True, at=now, grace=grace)
                    inbox.put(("update", update))
                    return
                deletes = pdb_delete() if callable(pdb_delete) else pdb_delete
                refused_by_pdb = refused_by_pdb or (deletes and response.pdb_blocked)
                if response.status in (EvictionStatus.BLOCKED, EvictionStatus.MULTIPLE_PDBS):
                    delay = backoff_delay(attempts, self.backoff_base, self.backoff_cap, self.rand)
                    if refused_by_pdb:  # wake up when the pod is due for deletion past its budget
                        due = seconds_until_pdb_delete(wanted, deadline.remaining(), self.grace_margin)
                        delay = min(delay, max(0.0, due))
                else:
                    errors += 1
                    if not response.retryable or errors >= EVICTION_ERROR_RETRIES:
                        error = f"HTTP {response.http_status}: {response.message}"
                        update = EvictionUpdate(pod.key, attempts, response, final=True, at=now, error=error)
                        inbox.put(("update", update))
                        return
                    delay = backoff_delay(errors, self.backoff_base, self.backoff_cap, self.rand)
                inbox.put(("update", EvictionUpdate(pod.key, attempts, response, final=False, at=now)))
                if self.clock.sleep(min(delay, deadline.remaining()), stop):
                    return
        except Exception as err:
            log.exception("eviction worker for %s crashed", pod.key)
            inbox.put(("update", EvictionUpdate(pod.key, attempts, None, final=True, error=f"internal error: {err}")))

    def _delete(self, pod: PodView, grace_period_seconds: int | None) -> EvictionResponse:
        try:
            deleted = self.kube.delete_pod(pod.namespace, pod.name, pod.uid or None, grace_period_seconds)
        except KubernetesApiError as err:
            return EvictionResponse(EvictionStatus.ERROR, 0, str(err), retryable=True)
        except KubernetesRejectedError as err:
            return EvictionResponse(EvictionStatus.ERROR, err.status, str(err), retryable=False)
        # A deleted finished pod is gone at once (the apiserver deletes terminal pods without grace), but the
        # watch confirms it; report it as accepted.
        return EvictionResponse(EvictionStatus.EVICTED if deleted else EvictionStatus.GONE, 200 if deleted else 404)
