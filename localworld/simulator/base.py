"""What every controller of the simulator shares: the action type, the pass's view of the caches, the hold-downs that
keep a pass from planning the same write twice, and the controller base class.

A reconcile pass (``localworld.simulator.reconcile``) snapshots the informers' caches into one ``View``, asks each
controller in turn to ``plan`` its writes into a list of ``Action`` and then runs those writes concurrently.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from localworld.rest import JSON, KubeRest
from localworld.simulator.informer import Informer
from localworld.simulator.pods import PodWriter

# (what, write): ``what`` names the write in log lines; ``write`` makes it (API calls, then cache updates).
Action = tuple[str, Callable[[], None]]


class Recent:
    """Hold-downs per (kind, key): a planned write is not planned again until its hold expires (monotonic seconds).

    Only the reconcile thread uses it (no lock).
    """

    def __init__(self) -> None:
        self._until: dict[tuple[str, str], float] = {}

    def check(self, kind: str, key: str, hold: float = 2.0) -> bool:
        """True when the same action on ``key`` was planned less than ``hold`` s ago; else records it now."""
        now = time.monotonic()
        if self._until.get((kind, key), 0.0) > now:
            return True
        self._until[(kind, key)] = now + hold
        if len(self._until) > 20000:
            self._until = {k: v for k, v in self._until.items() if v > now}
        return False

    def held(self, kind: str, key: str) -> bool:
        """True while a hold on (``kind``, ``key``) lasts; records nothing."""
        return self._until.get((kind, key), 0.0) > time.monotonic()


@dataclass
class View:
    """One pass's snapshot of the caches.

    ``nodes`` is keyed by node name; the other collections by ``namespace/name``. ``load`` counts live pods per node
    (``localworld.simulator.scheduler.node_load``); the ReplicaSet controller and the scheduler add to it as they place
    pods, so later placements in the same pass see earlier ones.
    """

    nodes: dict[str, JSON]
    pods: Mapping[str, JSON]
    rsets: Mapping[str, JSON]
    dsets: Mapping[str, JSON]
    deploys: Mapping[str, JSON]
    pdbs: Mapping[str, JSON]
    load: dict[str, int] = field(default_factory=dict)


@dataclass
class Shared:
    """The simulator's parts the controllers use: the API, the informers by name, pod writes and the hold-downs."""

    rest: KubeRest
    informers: Mapping[str, Informer]
    pod_writer: PodWriter
    recent: Recent


class Controller:
    """One controller's part of a reconcile pass: reads a ``View``, appends the writes it wants to ``actions``.

    Planning makes no API call; the actions do, on the simulator's write pool.
    """

    def __init__(self, shared: Shared) -> None:
        self.rest = shared.rest
        self.informers = shared.informers
        self.pod_writer = shared.pod_writer
        self.recent = shared.recent

    def plan(self, view: View, actions: list[Action]) -> None:
        raise NotImplementedError
