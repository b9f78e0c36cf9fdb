"""One pod's eviction retries as a state machine (pure but for the jitter source): which request to send next, and
what an answer means (the update to report, and how long to wait before the next try, or stop).

``agent.drain.evict.Evictor`` runs it on a worker thread, sleeping between tries; the fleet simulation
(``sim.agent``) runs the same machine as scheduled actions on simulated time. The rules (``Evictor`` docstring):
a 429 or 500 "more than one PodDisruptionBudget" is retried with backoff (``core.clock.backoff_delay``) until the
deadline, or, with ``pdb_delete``, until the pod's grace stops fitting (``seconds_until_pdb_delete``: then it is
DELETEd with the grace that remains, ``grace_past_pdb``); other retryable errors (5xx, connection) are retried
``EVICTION_ERROR_RETRIES`` times; anything else ends the pod's worker at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from agent.drain.policy import (
    Grace,
    GraceSource,
    PodAction,
    grace_for,
    grace_past_pdb,
    seconds_until_pdb_delete,
    wanted_grace,
)
from agent.drain.ports import EvictionApi
from agent.drain.progress import EvictionUpdate
from agent.kube.eviction import EvictionResponse, EvictionStatus
from agent.kube.views import PodView
from core.clock import backoff_delay
from core.exceptions import KubernetesApiError, KubernetesRejectedError
from core.model import DrainOptions

EVICTION_ERROR_RETRIES = 5  # tries of an eviction failing with a retryable error other than a PDB's 429


@dataclass(frozen=True)
class Request:
    """The next request for a pod: a DELETE (``delete``) or an Eviction, with the grace it carries (``grace`` is
    None for a finished pod's plain DELETE, which sends ``send`` = the command's override or nothing)."""

    delete: bool
    grace: Grace | None
    send: int | None


@dataclass
class EvictionAttempts:
    """The retries of one pod's eviction (or deletion).

    Args:
        pod: the pod as the drain listed it.
        action: ``PodAction.EVICT`` or ``PodAction.DELETE``.
        options: the command's drain options (its grace override).
        backoff_base, backoff_cap: seconds (``EVICTION_BACKOFF_SECONDS`` .. ``EVICTION_BACKOFF_MAX_SECONDS``).
        grace_margin: seconds a capped grace leaves before the deadline (``DRAIN_GRACE_MARGIN_SECONDS``).
    """

    pod: PodView
    action: PodAction
    options: DrainOptions
    backoff_base: float
    backoff_cap: float
    grace_margin: float
    attempts: int = 0
    errors: int = 0
    refused_by_pdb: bool = False
    wanted: int = field(init=False)
    source: GraceSource = field(init=False)

    def __post_init__(self) -> None:
        self.wanted, self.source = wanted_grace(self.pod, self.options)

    def expired(self) -> EvictionUpdate:
        """The final update when the deadline passed before another try."""
        return EvictionUpdate(self.pod.key, self.attempts, uid=self.pod.uid, response=None, final=True)

    def request(self, remaining: float) -> Request:
        """The request to send now, ``remaining`` seconds before the deadline (counts an attempt)."""
        self.attempts += 1
        if self.action == PodAction.DELETE:
            return Request(True, None, self.options.grace_period_seconds)
        if self.refused_by_pdb and seconds_until_pdb_delete(self.wanted, remaining, self.grace_margin) <= 0:
            grace = grace_past_pdb(self.wanted, remaining, self.grace_margin)
            return Request(True, grace, grace.send)
        grace = grace_for(self.wanted, self.source, remaining, self.grace_margin)
        return Request(False, grace, grace.send)

    def sending(self, request: Request, now: datetime) -> EvictionUpdate:
        """The announcement of ``request`` before it is sent (``EvictionUpdate.sent``): its grace names the pod's
        removal if the watch reports the pod gone before the request's answer reaches the drain."""
        return EvictionUpdate(
            self.pod.key,
            self.attempts,
            uid=self.pod.uid,
            response=None,
            final=False,
            at=now,
            grace=request.grace,
            sent=True,
        )

    def answer(
        self,
        request: Request,
        response: EvictionResponse,
        now: datetime,
        remaining: Callable[[], float],
        pdb_delete: bool,
        rand: Callable[[], float],
    ) -> tuple[EvictionUpdate, float | None]:
        """What ``response`` to ``request`` means: the update to report, and seconds before the next try (None: the
        worker is done). ``remaining`` gives the seconds left before the deadline; ``pdb_delete``: the drain is
        deadline-bound and deletes pods a budget still protects (``deletes_past_pdb``)."""
        if response.status in (EvictionStatus.EVICTED, EvictionStatus.GONE):
            return EvictionUpdate(
                self.pod.key,
                self.attempts,
                uid=self.pod.uid,
                response=response,
                final=True,
                at=now,
                grace=request.grace,
            ), None
        self.refused_by_pdb = self.refused_by_pdb or (pdb_delete and response.pdb_blocked)
        if response.status in (EvictionStatus.BLOCKED, EvictionStatus.MULTIPLE_PDBS):
            delay = backoff_delay(self.attempts, self.backoff_base, self.backoff_cap, rand)
            if self.refused_by_pdb:  # wake up when the pod is due for deletion past its budget
                due = seconds_until_pdb_delete(self.wanted, remaining(), self.grace_margin)
                delay = min(delay, max(0.0, due))
        else:
            self.errors += 1
            if not response.retryable or self.errors >= EVICTION_ERROR_RETRIES:
                error = f"HTTP {response.http_status}: {response.message}"
                return EvictionUpdate(
                    self.pod.key, self.attempts, uid=self.pod.uid, response=response, final=True, at=now, error=error
                ), None
            delay = backoff_delay(self.errors, self.backoff_base, self.backoff_cap, rand)
        return EvictionUpdate(
            self.pod.key, self.attempts, uid=self.pod.uid, response=response, final=False, at=now
        ), delay


def send(kube: EvictionApi, pod: PodView, request: Request) -> EvictionResponse:
    """Send ``request`` for ``pod`` (with its uid as the precondition); never raises for an API error."""
    if request.delete:
        return delete_answer(kube, pod, request.send)
    return kube.evict_pod(pod.namespace, pod.name, pod.uid or None, request.send)


def delete_answer(kube: EvictionApi, pod: PodView, grace_period_seconds: int | None) -> EvictionResponse:
    """DELETE ``pod``, its answer shaped as an eviction's: accepted (EVICTED 200), gone (GONE 404), or an error
    (retryable for 5xx and connection failures)."""
    try:
        deleted = kube.delete_pod(pod.namespace, pod.name, pod.uid or None, grace_period_seconds)
    except KubernetesApiError as err:
        return EvictionResponse(EvictionStatus.ERROR, 0, str(err), retryable=True)
    except KubernetesRejectedError as err:
        return EvictionResponse(EvictionStatus.ERROR, err.status, str(err), retryable=False)
    # A deleted finished pod is gone at once (the apiserver deletes terminal pods without grace), but the
    # watch confirms it; report it as accepted.
    return EvictionResponse(EvictionStatus.EVICTED if deleted else EvictionStatus.GONE, 200 if deleted else 404)
