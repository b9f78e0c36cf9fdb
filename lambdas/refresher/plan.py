"""The refresher's actions. Built by ``select``/``decide`` (pure) and applied in order by ``execute.execute``.

Each action is a frozen value with a ``describe()`` line for logs and responses. A run's progress is written
(``SaveRun``) before the effects that follow it, so a crash between the two leaves an intent the next invocation
completes.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from core.model import Command
from core.runs import Run


@dataclass(frozen=True)
class AcquireLock:
    """Take the cluster lock for the run (holder ``refresher:<run id>:<invocation>``, operation ``refresh``)."""

    holder: str
    lease_seconds: int

    def describe(self) -> str:
        return f"acquire the cluster lock as {self.holder} for {self.lease_seconds} s"


@dataclass(frozen=True)
class CreateRun:
    """Write the new ``RUN#`` item (its steps are the plan)."""

    run: Run

    def describe(self) -> str:
        return f"create run {self.run.run_id} with {len(self.run.steps)} steps"


@dataclass(frozen=True)
class SaveRun:
    """Write the run's new state, conditioned on the version read (``RunConflictError`` when another won);
    ``release``: give the lease the save is fenced by up in the same write (a save no effect follows, at the end of
    the holder's pass)."""

    run: Run
    changes: tuple[str, ...] = ()
    release: bool = False

    def describe(self) -> str:
        return f"record run {self.run.run_id}: " + ("; ".join(self.changes) or "state")


@dataclass(frozen=True)
class SetCapacity:
    """UpdateAutoScalingGroup with absolute values (idempotent): DesiredCapacity and/or MaxSize (None: not sent).

    The values come from the ``RUN#`` item; the executor clamps them to the group's ``core.capacity.Bounds``
    (``lambdas.refresher.bounds``: original MaxSize + the settings' surge limit, as Auto Scaling reports it) whatever
    the item said.
    """

    asg_name: str
    desired: int | None = None
    max_size: int | None = None

    def describe(self) -> str:
        parts = [
            f"desired {self.desired}" if self.desired is not None else "",
            f"max {self.max_size}" if self.max_size is not None else "",
        ]
        return f"set {self.asg_name} " + ", ".join(p for p in parts if p)


@dataclass(frozen=True)
class SendCommand:
    """Record the ``CMD#`` item (conditional: once) and send the command on SQS for the agent."""

    command: Command

    def describe(self) -> str:
        return (
            f"send {self.command.kind.value} command {self.command.command_id} for {self.command.instance_id}"
            f" (node {self.command.node_name or 'unknown'})"
        )


@dataclass(frozen=True)
class TerminateInstance:
    """TerminateInstanceInAutoScalingGroup; with ``decrement`` the group's desired capacity drops by one (a
    surge given back), without it the group launches a replacement (a master)."""

    asg_name: str
    instance_id: str
    decrement: bool

    def describe(self) -> str:
        how = "decrementing desired capacity" if self.decrement else "the group replaces it"
        return f"terminate {self.instance_id} in {self.asg_name} ({how})"


@dataclass(frozen=True)
class ReleaseLock:
    """Give the cluster lock up (the run is over): the lease this invocation holds for run ``run_id``, never another
    invocation's."""

    run_id: str

    def describe(self) -> str:
        return f"release the cluster lock held for run {self.run_id}"


class MetricUnitName(str, Enum):
    COUNT = "Count"
    SECONDS = "Seconds"


@dataclass(frozen=True)
class Metric:
    """One CloudWatch metric value (Powertools Metrics)."""

    name: str
    value: float = 1
    unit: MetricUnitName = MetricUnitName.COUNT

    def describe(self) -> str:
        return f"metric {self.name} {self.value:g} {self.unit.value}"


Action = AcquireLock | CreateRun | SaveRun | SetCapacity | SendCommand | TerminateInstance | ReleaseLock | Metric

# Actions that change something (dry-run leaves them undone).
EFFECTS = (AcquireLock, CreateRun, SaveRun, SetCapacity, SendCommand, TerminateInstance, ReleaseLock)
