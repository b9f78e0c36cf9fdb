"""What the refresher's decisions look at: the cluster's groups and instances (Auto Scaling, EC2), membership
(``NODE#``, written by the agent) and the run's commands (``CMD#``). Plain frozen values gathered by the handler.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from itertools import compress
from operator import attrgetter
from typing import Any

from core.kops import Role
from core.model import NodeRecord

# DescribeAutoScalingGroups' Instances[].LifecycleState values of an instance that is, or is becoming, a member.
LIVE_STATES = frozenset({"Pending", "Pending:Wait", "Pending:Proceed", "InService"})
_INSTANCE_ID, _LIFECYCLE = attrgetter("instance_id"), attrgetter("lifecycle_state")


@dataclass(frozen=True)
class InstanceFacts:
    """One instance of a group.

    Attributes:
        lifecycle_state: DescribeAutoScalingGroups ``Instances[].LifecycleState`` (``InService``, ``Pending``,
            ``Terminating``, ...).
        launch_template_version: ``Instances[].LaunchTemplate.Version`` (the version it was launched from), None
            when the group uses no launch template.
        launch_time: DescribeInstances ``LaunchTime`` (only gathered when a run is planned).
    """

    instance_id: str
    availability_zone: str = ""
    lifecycle_state: str = "InService"
    launch_template_version: str | None = None
    launch_time: datetime | None = None

    @property
    def live(self) -> bool:
        return self.lifecycle_state in LIVE_STATES


@dataclass(frozen=True)
class GroupFacts:
    """One managed ASG (tagged ``KubernetesCluster=<cluster>``).

    Attributes:
        launch_template_version: the version the group launches now, resolved from ``$Latest``/``$Default``
            through DescribeLaunchTemplates; None when unknown (no launch template, or not gathered).
    """

    name: str
    role: Role
    instance_group: str | None
    min_size: int
    max_size: int
    desired: int
    instances: tuple[InstanceFacts, ...] = ()
    launch_template_version: str | None = None

    def instance(self, instance_id: str) -> InstanceFacts | None:
        """The group's instance ``instance_id`` (the first listed of that id), or None."""
        return self._by_id.get(instance_id)

    @cached_property
    def _by_id(self) -> dict[str, InstanceFacts]:
        """``instances`` by id, made on the first ``instance`` asked (a pass asks for several of a group's hundreds);
        of an id listed twice, the first (``reversed``: a later entry would replace it)."""
        return dict(zip(map(_INSTANCE_ID, reversed(self.instances)), reversed(self.instances), strict=True))  # in C

    @cached_property
    def live(self) -> tuple[InstanceFacts, ...]:
        """The instances that are, or are becoming, members (``InstanceFacts.live``), in their order; made once (the
        facts are frozen: a pass asks for them several times), picked in C (a group of hundreds is new a pass)."""
        return tuple(compress(self.instances, map(LIVE_STATES.__contains__, map(_LIFECYCLE, self.instances))))

    @cached_property
    def live_ids(self) -> tuple[str, ...]:
        """The ids of ``live``, in their order; made once (a pass looks for its Ready ones and its new ones)."""
        return tuple(map(_INSTANCE_ID, self.live))

    def has_live(self, instance_id: str) -> bool:
        inst = self.instance(instance_id)
        return inst is not None and inst.live


@dataclass(frozen=True)
class World:
    """Everything the decisions need besides the run, the clock and the settings.

    Attributes:
        groups: the cluster's managed groups, by name.
        nodes: fresh membership records by instance id (stale ones already dropped).
        membership_confirmed: the agent's ``MEMBERSHIP`` mark was fresh when ``nodes`` was read, so ``nodes`` is its
            whole list and an instance missing from it has no node. False (the default): a record may be missing
            because it aged out under a stale mark; nothing is judged by absence (``decide.undo.undoing`` drains).
        commands: ``CMD#`` items of the run's commands, by command id.
        lock: the ``LOCK`` item as stored (None when never taken).
        donors: groups carrying capacity for a compensation (a ``COMP#`` ledger's donor not yet restored): the run
            does not surge them until they are given back.
        ready_live: group -> (its facts, the ids of its live instances whose node is serving: Ready and not ending,
            ``NodeRecord.serving``), as ``Context.ready_live`` found them in ``nodes`` (for those very facts: the same
            object); the worlds of one ``nodes`` map may share it (``world_read.gather``: the membership memo's map,
            never changed, again). Its lists: never change them.
    """

    groups: Mapping[str, GroupFacts] = field(default_factory=dict)
    nodes: Mapping[str, NodeRecord] = field(default_factory=dict)
    commands: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    lock: Mapping[str, Any] | None = None
    donors: frozenset[str] = frozenset()
    ready_live: dict[str, tuple[GroupFacts, list[str]]] = field(default_factory=dict, compare=False, repr=False)
    membership_confirmed: bool = False  # last: the fields before it keep their places for positional callers

    def ready(self, instance_id: str) -> bool:
        """The instance's node is Ready and not ending (``NodeRecord.serving``): a node cordoned for a Spot warning is
        no spare, no capacity and no Ready master, whatever its ``Ready`` condition says."""
        record = self.nodes.get(instance_id)
        return record is not None and record.serving

    def masters(self) -> list[GroupFacts]:
        return [g for g in self.groups.values() if g.role is Role.CONTROL_PLANE]
