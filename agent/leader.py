"""Leader election between agent replicas on a ``coordination.k8s.io/v1`` Lease (client-go's algorithm).

Only the leader consumes commands and reports membership; the other replicas stand by and take over when the
leader stops renewing. The Python client has no Lease lock, so this is one, through ``agent.kube.client.KubeAdapter``
(get/create/replace of the Lease, each replace preconditioned on the ``resourceVersion`` read: optimistic
concurrency, the apiserver answers 409 to a writer that read a stale copy, so two candidates never both win).

Timing (settings ``LEADER_ELECTION_*``, defaults as client-go's, shortened so a standby takes over within 15 s):

- every ``retry`` seconds (2) each replica reads the Lease; the leader renews it (``renewTime``);
- a standby judges the Lease expired when its content has not changed for ``leaseDurationSeconds`` (10) *as
  measured on the standby's own monotonic clock since it first saw that content*, never by comparing
  ``renewTime`` with its wall clock (no clock-skew assumption, as client-go);
- a leader that could not renew for ``renew deadline`` seconds (7, < the lease) steps down before anyone may
  take over;
- a leader that stops (SIGTERM) releases the Lease (``holderIdentity`` "" and a 1 s duration), so a standby takes
  over at its next read instead of after the lease.

Worst case after a leader dies (SIGKILL, no release): its last renewal was < retry before; a standby sees it at
most retry later and takes over lease + retry after that: <= lease + 2 x retry = 14 s.

``choose`` and ``lease_spec`` are pure; ``LeaderElector`` does the reads and writes.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from enum import Enum
from typing import Any, Protocol

from agent.kube.views import LeaseView, micro_time
from core.exceptions import NodeManagerError
from core.model import utcnow

log = logging.getLogger(__name__)

RELEASED_DURATION_SECONDS = 1  # what a released Lease says (client-go's ReleaseOnCancel)


class Move(str, Enum):
    """What a candidate does after reading the Lease."""

    CREATE = "create"  # no Lease yet
    RENEW = "renew"  # we hold it
    ACQUIRE = "acquire"  # released, or its holder stayed silent for a whole lease
    WAIT = "wait"  # someone else holds it and renews it


def choose(
    lease: LeaseView | None, identity: str, unchanged_for_seconds: float, default_duration_seconds: float
) -> Move:
    """The move of candidate ``identity`` given the Lease it read. Pure.

    Args:
        lease: the Lease, None when it does not exist.
        unchanged_for_seconds: how long (this candidate's monotonic clock) the Lease's content has been the same.
        default_duration_seconds: used when the Lease carries no ``leaseDurationSeconds``.
    """
    if lease is None:
        return Move.CREATE
    if lease.holder == identity:
        return Move.RENEW
    if not lease.holder:
        return Move.ACQUIRE
    duration = lease.duration_seconds if lease.duration_seconds else default_duration_seconds
    return Move.ACQUIRE if unchanged_for_seconds > duration else Move.WAIT


def lease_spec(
    move: Move, lease: LeaseView | None, identity: str, now: datetime, duration_seconds: float
) -> dict[str, Any]:
    """The Lease spec (JSON) candidate ``identity`` writes for ``move`` (CREATE, RENEW or ACQUIRE). Pure.

    A renewal keeps ``acquireTime`` and ``leaseTransitions``; an acquisition from another holder sets
    ``acquireTime`` to ``now`` and counts one more transition.
    """
    if move is Move.WAIT:
        raise ValueError("nothing to write while waiting")
    transitions = lease.transitions if lease is not None else 0
    acquired = now
    if move is Move.RENEW and lease is not None:
        acquired = lease.acquire_time or now
    elif move is Move.ACQUIRE and lease is not None and lease.holder != identity:
        transitions += 1
    return {
        "holderIdentity": identity,
        "leaseDurationSeconds": math.ceil(duration_seconds),
        "acquireTime": micro_time(acquired),
        "renewTime": micro_time(now),
        "leaseTransitions": transitions,
    }


class LeaseApi(Protocol):
    """The Lease calls of ``agent.kube.client.KubeAdapter``."""

    def get_lease(self, namespace: str, name: str) -> LeaseView | None: ...

    def create_lease(self, namespace: str, name: str, spec: Mapping[str, Any]) -> LeaseView | None: ...

    def replace_lease(
        self, namespace: str, name: str, spec: Mapping[str, Any], resource_version: str
    ) -> LeaseView | None: ...


class LeaderElector:
    """Campaigns for the Lease ``namespace/name`` as ``identity`` (timing in the module docstring).

    Args:
        leases: the Lease calls (``KubeAdapter``).
        lease_seconds, renew_deadline_seconds, retry_seconds: ``LEADER_ELECTION_LEASE_SECONDS``,
            ``..._RENEW_DEADLINE_SECONDS``, ``..._RETRY_SECONDS``.
        on_change: called with True when this replica becomes leader and False when it stops being one (from
            the elector's thread; must not block).
        on_api_reached: called after every successful Lease call (the readiness probe's "Kubernetes reached").
        monotonic, now: clocks, injectable for tests.

    Attributes:
        leading: set while this replica is the leader.
        lost: set once leadership was lost (not released): the agent must stop working and exit.
        state_known: True once a round completed (leader or not).
    """

    def __init__(
        self,
        leases: LeaseApi,
        namespace: str,
        name: str,
        identity: str,
        *,
        lease_seconds: float,
        renew_deadline_seconds: float,
        retry_seconds: float,
        on_change: Callable[[bool], None] | None = None,
        on_api_reached: Callable[[], None] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = utcnow,
    ) -> None:
        self.leases = leases
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_seconds = lease_seconds
        self.renew_deadline_seconds = renew_deadline_seconds
        self.retry_seconds = retry_seconds
        self.on_change = on_change
        self.on_api_reached = on_api_reached
        self.monotonic = monotonic
        self.now = now
        self.leading = threading.Event()
        self.lost = threading.Event()
        self.state_known = False
        self._seen: tuple[str, str] | None = None  # (resourceVersion, holder) last seen
        self._seen_at = 0.0
        self._renewed_at = 0.0
        self._lease: LeaseView | None = None  # the Lease as this replica last wrote it

    # -- one round -------------------------------------------------------------------------------------------

    def step(self) -> bool:
        """One election round: read the Lease, then create, renew or take it over if due. Returns whether
        this replica leads after the round. Never raises: API errors are logged, and a leader that could not
        renew for the renew deadline steps down."""
        try:
            leading = self._attempt()
        except NodeManagerError as err:
            log.warning("leader election round failed lease=%s/%s error=%s", self.namespace, self.name, err)
            if not self.leading.is_set():
                return False  # the state stays what it was (unknown before the first round went through)
            if self.monotonic() - self._renewed_at < self.renew_deadline_seconds:
                return True  # still within the renew deadline: keep leading, try again next round
            leading = False
        self._set(leading)
        return leading

    def _attempt(self) -> bool:
        lease = self.leases.get_lease(self.namespace, self.name)
        self._reached()
        now_mono = self.monotonic()
        seen = None if lease is None else (lease.resource_version, lease.holder)
        if seen != self._seen:
            self._seen, self._seen_at = seen, now_mono
        if self.leading.is_set() and (lease is None or lease.holder != self.identity):
            log.warning(
                "lease taken by another replica lease=%s/%s holder=%s",
                self.namespace,
                self.name,
                lease.holder if lease else None,
            )
            return False
        move = choose(lease, self.identity, now_mono - self._seen_at, self.lease_seconds)
        if move is Move.WAIT:
            assert lease is not None
            log.debug("standing by lease=%s/%s holder=%s", self.namespace, self.name, lease.holder)
            return False
        spec = lease_spec(move, lease, self.identity, self.now(), self.lease_seconds)
        if move is Move.CREATE:
            written = self.leases.create_lease(self.namespace, self.name, spec)
        else:
            assert lease is not None
            written = self.leases.replace_lease(self.namespace, self.name, spec, lease.resource_version)
        self._reached()
        if written is None:  # another candidate wrote first (409): read again next round
            log.info("lost a lease race lease=%s/%s move=%s", self.namespace, self.name, move.value)
            return self.leading.is_set() and now_mono - self._renewed_at < self.renew_deadline_seconds
        if move is not Move.RENEW:
            log.info(
                "acquired the lease lease=%s/%s identity=%s previous=%s transitions=%d",
                self.namespace,
                self.name,
                self.identity,
                lease.holder if lease else None,
                written.transitions,
            )
        self._lease = written
        self._seen, self._seen_at = (written.resource_version, written.holder), now_mono
        self._renewed_at = now_mono
        return True

    def _set(self, leading: bool) -> None:
        """Record the round's result; ``on_change`` hears the first known state and every change."""
        first = not self.state_known
        self.state_known = True
        was = self.leading.is_set()
        if leading == was and not first:
            return
        if leading:
            self.leading.set()
        elif was:
            self.leading.clear()
            self.lost.set()
            log.error("leadership lost lease=%s/%s identity=%s", self.namespace, self.name, self.identity)
        if self.on_change is not None:
            self.on_change(leading)

    def _reached(self) -> None:
        if self.on_api_reached is not None:
            self.on_api_reached()

    # -- loop and release ------------------------------------------------------------------------------------

    def run(self, stop: threading.Event, tick: Callable[[], None] | None = None) -> None:
        """Campaign every ``retry_seconds`` until ``stop`` is set or leadership is lost. Never raises.

        Args:
            tick: called every round (the liveness probe's heartbeat of this loop).
        """
        log.info("leader election started lease=%s/%s identity=%s", self.namespace, self.name, self.identity)
        while not stop.is_set() and not self.lost.is_set():
            if tick is not None:
                tick()
            self.step()
            stop.wait(self.retry_seconds)

    def release(self) -> bool:
        """Give the Lease up if this replica holds it (holder "", duration 1 s), so a standby takes over at its
        next read. Returns whether it was released. Never raises."""
        if not self.leading.is_set():
            return False
        self.leading.clear()
        if self.on_change is not None:
            self.on_change(False)
        try:
            lease = self.leases.get_lease(self.namespace, self.name)
            if lease is None or lease.holder != self.identity:
                return False
            now = self.now()
            spec = {
                "holderIdentity": "",
                "leaseDurationSeconds": RELEASED_DURATION_SECONDS,
                "acquireTime": micro_time(lease.acquire_time or now),
                "renewTime": micro_time(now),
                "leaseTransitions": lease.transitions,
            }
            released = self.leases.replace_lease(self.namespace, self.name, spec, lease.resource_version)
        except NodeManagerError as err:
            log.warning("could not release the lease lease=%s/%s error=%s", self.namespace, self.name, err)
            return False
        if released is not None:
            log.info("released the lease lease=%s/%s", self.namespace, self.name)
        return released is not None
