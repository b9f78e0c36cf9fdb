"""What the replenisher's decision looks at: the cluster's Auto Scaling groups and what the table has recorded.

Plain frozen values, gathered once per invocation by ``gather.gather`` with a budget of calls:

- one Query of the table's cluster partition (``gather.read_items``; paginated by DynamoDB at 1 MB) gives the lock,
  the ledgers (``COMP#``), the refresh runs (``RUN#``) and the early replacements (``DETACH#``); of the agent
  partition, two Queries (a prefix each) of the replenisher's own commands (``CMD#``), which a tick makes only when
  ``decide`` can look at one (``own_commands``); then the membership
  (``adapters.dynamo.nodes.read_membership``): a GetItem of the ``MEMBERSHIP`` mark and a Query of the ``NODE#``
  items, left out when the mark's version is the one this execution environment read them at (and, when the mark
  lists every change since, only the changed items of the Query matched: ``NodeRecordMemo.patched``);
- then (after the lock was read: a change made after it is made under a lock taken after it, which the acquire
  conditioned on the fencing read refuses) one DescribeAutoScalingGroups, filtered on
  ``tag:KubernetesCluster=<cluster>`` and paginated (100 groups a page), gives every managed group with its instances
  (``Group``);
- DescribeInstances only for the InService instances with no fresh membership record (their launch time decides
  whether they are past the maximum provision time), 200 ids a call, none when every instance is registered;
- DescribeInstances only for the instances of ``DETACH#`` records past ``DETACHED_MAX_SECONDS`` (their state and
  cluster tag decide the sweep), none when no record is due.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any

from core.kops import ManagedGroup, Role
from core.ledger import Ledger
from core.model import NodeRecord
from core.runs import Run, RunStatus

ACTIVE_STATES = frozenset({"InService", "Pending", "Pending:Wait", "Pending:Proceed"})
IN_SERVICE = "InService"
# RUN# statuses after which a refresh run no longer holds capacity (anything else counts as active)


@dataclass(frozen=True)
class Instance:
    """One instance of a group (DescribeAutoScalingGroups' ``Instances`` entry, plus EC2's launch time when asked).

    Attributes:
        lifecycle_state: ``InService``, ``Pending``, ``Terminating``, ...
        launch_time: from DescribeInstances, only for instances without a registered node; else None.
    """

    instance_id: str
    availability_zone: str
    lifecycle_state: str
    health_status: str = "Healthy"
    launch_time: datetime | None = None

    @property
    def active(self) -> bool:
        return self.lifecycle_state in ACTIVE_STATES


@dataclass(frozen=True)
class Group:
    """A managed Auto Scaling group (tagged ``KubernetesCluster=<cluster>``).

    Attributes:
        run_surge: desired capacity an active refresh run added on top of the group's own (``Run.surge``): not a
            shortfall when it has not launched yet, never given back by the replenisher.
        run_busy: an active refresh run is changing this group's capacity now (``Run.busy_groups``): it is never a
            donor until the run is done with it.
        created: the group's ``CreatedTime`` as DescribeAutoScalingGroups gives it (text; empty when absent): a
            group deleted and created again under the same name (kOps) has a new one.
    """

    info: ManagedGroup
    desired: int
    min_size: int
    max_size: int
    instances: tuple[Instance, ...] = ()
    run_surge: int = 0
    run_busy: bool = False
    created: str = ""

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def role(self) -> Role:
        return self.info.role

    @property
    def active(self) -> tuple[Instance, ...]:
        """InService and Pending instances (what counts against the desired capacity)."""
        return tuple(i for i in self.instances if i.active)

    @property
    def own_desired(self) -> int:
        """Desired capacity without an active refresh run's surge."""
        return self.desired - self.run_surge

    @property
    def shortfall(self) -> int:
        """Desired capacity (without a refresh run's surge) minus InService/Pending instances (0 or more)."""
        return max(0, self.own_desired - len(self.active))

    def has(self, instance_id: str) -> bool:
        return any(i.instance_id == instance_id and i.active for i in self.instances)


@dataclass(frozen=True)
class Detached:
    """A ``DETACH#`` record (``core.detach``) and, once it is due, what EC2 says of its instance.

    Attributes:
        state: the record's state (``intended``, ``detached``, ``terminating``, ``terminated``, ``gone``).
        recorded_at: when the detach was recorded (UTC); None when the record has no readable time.
        ec2_state: ``running``, ``stopped``, ... from DescribeInstances; None when not asked (not due) or EC2 does not
            know the id any more.
        cluster_tag: the instance's ``KubernetesCluster`` tag (None: untagged or not asked).
        asked: whether EC2 was asked about it this invocation.
    """

    instance_id: str
    asg_name: str
    state: str
    recorded_at: datetime | None
    ec2_state: str | None = None
    cluster_tag: str | None = None
    asked: bool = False


@dataclass(frozen=True)
class World:
    """Everything ``decide`` needs besides the notice, the clock and the settings.

    Attributes:
        groups: managed group name -> ``Group``.
        ledgers: group name -> its ``COMP#`` ledger (``Ledger``); unreadable items are left out (and logged).
        nodes: instance id -> fresh membership record (older than ``MEMBERSHIP_MAX_AGE_SECONDS`` by both its own
            ``reported_at`` and the ``MEMBERSHIP`` mark dropped; ``gather`` judged that, and ``confirmed_at`` is
            None on the records of the items the agent writes).
        membership_confirmed: the agent's ``MEMBERSHIP`` mark is fresh (``core.model.fresh_by_mark``): ``nodes``
            is the agent's whole list, so an InService instance without a record has no node. False (the mark stale
            or missing: the agent down, its writes refused): ``nodes`` holds only the records fresh by their own
            write, and an instance's absence from it proves nothing; the cleanup judges no instance by it.
        commands: command id -> ``CMD#`` item, for the replenisher's own commands (``giveback-``/``surplus-``);
            empty on a tick ``decide`` cannot look at one (``own_commands``: not read).
        unreadable_commands: the ids of the replenisher's own ``CMD#`` items left out of ``commands`` as unreadable:
            recorded all the same, so a drain sent again takes an id past them (``decide.builder.reissued_id``);
            never a finished drain.
        protected: instance ids named by an active ``RUN#`` item or a ``DETACH#`` item: never judged surplus.
        active_runs: the active refresh runs (``RUN#`` items read as ``core.runs.Run``): the cleanup leaves alone
            the groups a run names.
        runs_unreadable: an active-looking ``RUN#`` item did not validate as a ``Run``: what it protects is unknown,
            so the cleanup does nothing this invocation.
        lock: the ``LOCK`` item as read (None: never taken).
        detached: instance id -> its ``DETACH#`` record (``Detached``).
        run_groups: the groups ``active_runs`` name (``decide.cleanup.run_group_names``), as ``gather`` made them once
            per run read; None: not given, the cleanup makes them of ``active_runs``.
    """

    groups: Mapping[str, Group]
    ledgers: Mapping[str, Ledger] = field(default_factory=dict)
    nodes: Mapping[str, NodeRecord] = field(default_factory=dict)
    membership_confirmed: bool = False
    commands: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    unreadable_commands: frozenset[str] = frozenset()
    protected: frozenset[str] = frozenset()
    active_runs: tuple[Run, ...] = ()
    runs_unreadable: bool = False
    lock: Mapping[str, Any] | None = None
    detached: Mapping[str, Detached] = field(default_factory=dict)
    run_groups: frozenset[str] | None = None

    def ledger(self, asg_name: str) -> Ledger:
        return self.ledgers.get(asg_name) or blank_ledger(asg_name)

    def ready_nodes(self, group: Group) -> int:
        """InService instances of ``group`` with a fresh membership record that is serving (Ready and not ending,
        ``NodeRecord.serving``): a node under a Spot warning is no recovered capacity."""
        return sum(
            1
            for i in group.instances
            if i.lifecycle_state == IN_SERVICE and (n := self.nodes.get(i.instance_id)) and n.serving
        )


def blank_ledger(asg_name: str) -> Ledger:
    """``Ledger(asg_name=asg_name)``, the ledger of a group without a ``COMP#`` item, made once per name by an execution
    environment and shared: every field of a ``Ledger`` is frozen (its ``Backoff`` too) and a blank one holds no
    container (no compensation), so nothing can change it; a change is a copy (``model_copy``). A tick asked for one
    about fifteen times at 12 nodes (``decide``'s rules, group by group), 2.5 us each."""
    return _blank(asg_name) if type(asg_name) is str else Ledger(asg_name=asg_name)


@lru_cache(maxsize=1024)  # group names: a cluster has a few dozen
def _blank(asg_name: str) -> Ledger:
    return Ledger(asg_name=asg_name)


def run_active(item: Mapping[str, Any]) -> bool:
    """Whether a ``RUN#`` item is an active refresh run, by ``core.runs.RunStatus`` (running, pausing, cancelling).

    A status this code does not know counts as active: protecting capacity by mistake costs a tick, judging a
    run's surge as surplus would remove it under the run.
    """
    try:
        return RunStatus(str(item.get("status", ""))).active
    except ValueError:
        return True
