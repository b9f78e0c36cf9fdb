"""What the refresher's service works with: its one logger and the ``RefresherDeps`` protocol (``handler.Deps`` in
production and tests)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from adapters.aws.ports import AwsPort
from adapters.dynamo.lock import LeaseLock
from adapters.dynamo.node_memo import NodeRecordMemo
from adapters.dynamo.runs import RunStore
from adapters.dynamo.store import Store
from core.lock import Lease
from core.settings import RefresherSettings
from lambdas.common.handler import lambda_logger
from lambdas.refresher.execute import Effects
from lambdas.refresher.gather import GatherMemo

# The refresher's one Powertools Logger (``handler`` injects the Lambda context into it).
logger = lambda_logger()


class RefresherDeps(Protocol):
    """What the service needs (``handler.Deps`` in production and tests)."""

    @property
    def settings(self) -> RefresherSettings: ...

    @property
    def store(self) -> Store: ...

    @property
    def aws(self) -> AwsPort: ...

    @property
    def runs(self) -> RunStore: ...

    @property
    def lock(self) -> LeaseLock: ...

    @property
    def clock(self) -> Callable[[], datetime]: ...

    @property
    def sleep(self) -> Callable[[float], None]: ...

    @property
    def monotonic(self) -> Callable[[], float]: ...

    @property
    def memo(self) -> NodeRecordMemo: ...

    @property
    def gather_memo(self) -> GatherMemo: ...

    def effects(self, lease: Lease | None = None) -> Effects: ...
