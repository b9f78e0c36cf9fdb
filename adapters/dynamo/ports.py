"""Ports: the typed surface of the table adapters that the Lambdas' executors and handlers, and the agent, depend on.

``adapters.dynamo.store.Store`` satisfies ``CommandStore``, ``NodeStore``, ``DetachStore`` and ``ItemReader`` at once;
``runs.RunStore`` satisfies ``RunRepository`` and ``lock.LeaseLock`` satisfies ``ClusterLock``. An in-memory
implementation (a simulation, a test double) satisfies them without boto3.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import Any, Protocol

from adapters.dynamo.node_memo import Change
from core.detach import DetachState
from core.lock import Lease
from core.model import Command, CommandStatus, NodeRecord
from core.runs import Run


class ItemReader(Protocol):
    """Plain reads of the cluster's items (items as plain Python values; ``query_partition`` reads both partitions)."""

    def get(self, sk: str, consistent: bool = True) -> dict[str, Any] | None: ...

    def query_prefix(self, prefix: str, consistent: bool = False, convert: bool = True) -> Iterator[dict[str, Any]]: ...

    def query_partition(
        self, consistent: bool = False, wanted: Callable[[str], bool] | None = None, convert: bool = True
    ) -> Iterator[dict[str, Any]]: ...


class CommandStore(Protocol):
    """``CMD#`` items and their conditional transitions (``adapters.dynamo.commands``)."""

    def record_command(
        self, command: Command, ttl_seconds: int, now: datetime | None = None, fence: Lease | None = None
    ) -> None: ...

    def get_command(self, command_id: str) -> dict[str, Any] | None: ...

    def start_command(
        self,
        command: Command,
        worker: str,
        stale_after_seconds: int,
        ttl_seconds: int,
        now: datetime | None = None,
        *,
        retake_own: bool = False,
        message_id: str | None = None,
    ) -> int: ...

    def heartbeat_command(
        self,
        command_id: str,
        worker: str,
        attempt: int,
        progress: dict[str, Any] | None = None,
        now: datetime | None = None,
    ) -> dict[str, Any]: ...

    def finish_command(
        self,
        command_id: str,
        worker: str,
        attempt: int,
        status: CommandStatus,
        result: dict[str, Any],
        now: datetime | None = None,
    ) -> None: ...

    def release_command(self, command_id: str, worker: str, attempt: int, now: datetime | None = None) -> None: ...

    def mark_reported(self, command_id: str, status: CommandStatus, now: datetime | None = None) -> None: ...


class NodeStore(Protocol):
    """``NODE#`` membership items (``adapters.dynamo.nodes``)."""

    def put_node(self, record: NodeRecord, ttl_seconds: int) -> None: ...

    def delete_node(self, instance_id: str) -> None: ...

    def get_node(self, instance_id: str, max_age_seconds: float, now: datetime | None = None) -> NodeRecord | None: ...

    def list_nodes(self, max_age_seconds: float, now: datetime | None = None) -> list[NodeRecord]: ...

    def put_membership_mark(
        self,
        confirmed_at: datetime,
        nodes: int,
        ttl_seconds: int,
        version: str | None = None,
        changes: Iterable[Change] | None = None,
    ) -> None: ...

    def set_membership_version(self, version: str, changes: Iterable[Change] | None = None) -> bool: ...

    def membership_mark(self) -> datetime | None: ...

    def recorded_nodes(self) -> list[NodeRecord]: ...


class DetachStore(Protocol):
    """``DETACH#`` records (``adapters.dynamo.detach``)."""

    def record_detach(
        self, instance_id: str, asg_name: str, reason: str, ttl_seconds: int, now: datetime | None = None
    ) -> bool: ...

    def get_detach(self, instance_id: str) -> dict[str, Any] | None: ...

    def mark_detached(self, instance_id: str, state: DetachState | str, now: datetime | None = None) -> None: ...


class RunRepository(Protocol):
    """``RUN#`` items saved whole, conditioned on their version (``adapters.dynamo.runs``)."""

    def create(self, run: Run, fence: Lease | None = None) -> None: ...

    def get(self, run_id: str) -> Run | None: ...

    def save(self, run: Run, fence: Lease | None = None) -> Run: ...

    def list(self, limit: int = 10) -> builtins.list[Run]: ...

    def active(self) -> Run | None: ...


class ClusterLock(Protocol):
    """The ``LOCK`` lease (``adapters.dynamo.lock``)."""

    def acquire(
        self,
        holder: str,
        operation: str,
        lease_seconds: float,
        *,
        seen: dict[str, Any] | None = None,
        use_seen: bool = False,
    ) -> Lease: ...

    def renew(self, lease: Lease, lease_seconds: float) -> Lease: ...

    def release(self, lease: Lease) -> None: ...

    def current(self) -> dict[str, Any] | None: ...
