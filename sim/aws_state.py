"""The simulated account's state: launch templates, Auto Scaling groups and EC2 instances (plain data, no behaviour
beyond the answers DescribeAutoScalingGroups and DescribeInstances give).

Shapes follow the API references: ``AutoScalingGroup`` and ``Instance`` of DescribeAutoScalingGroups (EC2 Auto
Scaling API Reference), ``Instance`` of DescribeInstances (EC2 API Reference). Instance lifecycle states are Auto
Scaling's ("Amazon EC2 Auto Scaling instance lifecycle", EC2 Auto Scaling User Guide): ``Pending``, ``InService``,
``Terminating``, ``Terminating:Wait``, ``Terminating:Proceed``, ``Detaching``; EC2 states are ``pending``,
``running``, ``shutting-down``, ``terminated`` ("Amazon EC2 instance state changes", EC2 User Guide).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from core.kops import CLUSTER_TAG, INSTANCE_GROUP_TAG, MASTER_ROLE_TAGS, NODE_ROLE_TAG
from sim.kernel import Timer

ACTIVE_STATES = ("Pending", "Pending:Wait", "Pending:Proceed", "InService")  # count toward desired capacity
TERMINATING_STATES = ("Terminating", "Terminating:Wait", "Terminating:Proceed")
LIVE_EC2_STATES = ("pending", "running")
PLACEMENT_FIELDS = frozenset({"state", "group", "zone"})  # what says which instances run where


class PlacementEpoch:
    """Bumped whenever any instance's ``state``, ``group`` or ``zone`` is set (``Instance.__setattr__``, creation
    included): a view of which instances run where (``sim.view.View.running_instances``) made at one value holds
    while it has not moved, and is brought up to a later value by the instances ``changes`` names since (when it
    still holds every value since). Never read by a decision."""

    value = 0
    changes: ClassVar[deque[tuple[int, str]]] = deque(maxlen=10000)  # (value, the instance id set then), the last ones


def kops_tags(cluster: str, instance_group: str, control_plane: bool) -> dict[str, str]:
    """The tags kOps gives an instance group's ASG (and propagates to its instances), as ``core.kops`` reads them."""
    tags = {CLUSTER_TAG: cluster, INSTANCE_GROUP_TAG: instance_group, "Name": f"{instance_group}.{cluster}"}
    tags.update(dict.fromkeys(MASTER_ROLE_TAGS, "1") if control_plane else {NODE_ROLE_TAG: "1"})
    return tags


@dataclass
class LaunchTemplate:
    """A launch template's id, name and versions (DescribeLaunchTemplates: ``DefaultVersionNumber``,
    ``LatestVersionNumber``)."""

    template_id: str
    name: str
    default_version: int = 1
    latest_version: int = 1

    def resolve(self, version: str) -> str:
        """``$Latest`` / ``$Default`` / a number, as the version number an instance launches with."""
        if version == "$Latest":
            return str(self.latest_version)
        if version in ("$Default", ""):
            return str(self.default_version)
        return version


@dataclass(frozen=True)
class TerminationHook:
    """A termination lifecycle hook (PutLifecycleHook with ``autoscaling:EC2_INSTANCE_TERMINATING``).

    Attributes:
        name: ``LifecycleHookName``.
        heartbeat_timeout: ``HeartbeatTimeout`` seconds (30..7200; the stack's default 300).
        default_result: ``CONTINUE`` or ``ABANDON`` (for a termination both end in termination).
    """

    name: str
    heartbeat_timeout: int = 300
    default_result: str = "CONTINUE"

    @property
    def global_timeout(self) -> int:
        """The longest an instance may wait: 100 x the heartbeat timeout or 48 hours, whichever is smaller."""
        return min(100 * self.heartbeat_timeout, 48 * 3600)


@dataclass
class LifecycleWait:
    """An active lifecycle action (an instance in ``Terminating:Wait``)."""

    hook: TerminationHook
    token: str
    started: float
    timer: Timer


@dataclass(slots=True)  # its fields at fixed places: a look-up of thousands touches one block each
class Instance:
    """One EC2 instance and, while a group holds it, its place there.

    Attributes:
        state: EC2 ``State.Name``.
        lifecycle: ``InstanceLifecycle``: ``spot`` or "" (On-Demand).
        group: the Auto Scaling group holding it, None when detached or never in one.
        lifecycle_state: its Auto Scaling lifecycle state ("" outside a group).
        health: Auto Scaling ``HealthStatus``.
        template_version: the launch template version it was launched with (a number as a string).
        wait: the active termination lifecycle action, if any.
        started: simulated second it was launched (0 for one there when the simulation began).
        gone_at: simulated second it entered ``shutting-down`` (None while alive).
        reclaim_at: simulated second a Spot interruption terminates it (None when none is announced).
        reclaim_warned: simulated second that interruption was announced (None when none is).
    """

    instance_id: str
    zone: str
    instance_type: str
    lifecycle: str
    launch_time: datetime
    template_id: str
    template_version: str
    tags: dict[str, str]
    state: str = "pending"
    started: float = 0.0
    group: str | None = None
    lifecycle_state: str = ""
    health: str = "Healthy"
    protected: bool = False
    wait: LifecycleWait | None = None
    gone_at: float | None = None
    reclaim_at: float | None = None
    reclaim_warned: float | None = None
    _entry: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def pool(self) -> tuple[str, str]:
        """(instance type, Availability Zone): the Spot capacity pool."""
        return (self.instance_type, self.zone)

    @property
    def alive(self) -> bool:
        return self.state in LIVE_EC2_STATES

    def __setattr__(self, name: str, value: Any) -> None:
        if name in PLACEMENT_FIELDS:
            PlacementEpoch.value += 1
            PlacementEpoch.changes.append((PlacementEpoch.value, self.instance_id))
        object.__setattr__(self, name, value)

    def set_lifecycle(self, state: str, health: str | None = None) -> None:
        """A new Auto Scaling lifecycle state (and health status): the only way they change."""
        self.lifecycle_state = state
        if health is not None:
            self.health = health
        self._entry = None

    def group_entry(self, template_name: str) -> dict[str, Any]:
        """``AutoScalingGroups[].Instances[]`` entry of DescribeAutoScalingGroups (cached until ``set_lifecycle``)."""
        if self._entry is None:
            self._entry = {
                "InstanceId": self.instance_id,
                "InstanceType": self.instance_type,
                "AvailabilityZone": self.zone,
                "LifecycleState": self.lifecycle_state,
                "HealthStatus": self.health,
                "LaunchTemplate": {
                    "LaunchTemplateId": self.template_id,
                    "LaunchTemplateName": template_name,
                    "Version": self.template_version,
                },
                "ProtectedFromScaleIn": self.protected,
            }
        return self._entry

    def ec2_entry(self) -> dict[str, Any]:
        """``Reservations[].Instances[]`` entry of DescribeInstances (the fields the product reads, and a few more)."""
        entry: dict[str, Any] = {
            "InstanceId": self.instance_id,
            "InstanceType": self.instance_type,
            "LaunchTime": self.launch_time,
            "Placement": {"AvailabilityZone": self.zone, "Tenancy": "default"},
            "State": {"Code": STATE_CODES[self.state], "Name": self.state},
            "Tags": [{"Key": k, "Value": v} for k, v in sorted(self.tags.items())],
        }
        if self.lifecycle:
            entry["InstanceLifecycle"] = self.lifecycle
        return entry


# EC2 ``State.Code`` (low byte) per state name, EC2 API Reference ``InstanceState``.
STATE_CODES = {"pending": 0, "running": 16, "shutting-down": 32, "terminated": 48, "stopping": 64, "stopped": 80}


@dataclass
class Group:
    """One Auto Scaling group as kOps creates it.

    Attributes:
        zones: its Availability Zones (kOps makes one group per AZ, or one spanning several).
        spot: True for a Spot group (a ``MixedInstancesPolicy`` with 0 % On-Demand, as kOps writes it).
        template_version: the group's launch template version: ``$Latest``, ``$Default`` or a number.
        tags: the group's tags (all propagated at launch, as kOps sets them).
        hooks: its termination lifecycle hooks.
        members: the instances it holds, in launch order.
        launch_backoff_until: no launch attempt before this simulated second (after failures).
        launch_failures: failed attempts in a row (the backoff doubles with each).
        revision: bumped by every change ``describe`` shows (``Cloud.touch``); its answer is cached per revision.
    """

    name: str
    group_id: str
    zones: tuple[str, ...]
    min_size: int
    max_size: int
    desired: int
    instance_type: str
    spot: bool
    template: LaunchTemplate
    template_version: str
    tags: dict[str, str]
    created: datetime
    hooks: tuple[TerminationHook, ...] = ()
    members: dict[str, Instance] = field(default_factory=dict)
    launch_backoff_until: float = 0.0
    launch_failures: int = 0
    revision: int = 0
    _described: tuple[int, dict[str, Any]] | None = field(default=None, repr=False)
    _static: dict[str, Any] | None = field(default=None, repr=False)

    def active(self) -> list[Instance]:
        """Members that count toward the desired capacity (pending or in service)."""
        return [i for i in self.members.values() if i.lifecycle_state in ACTIVE_STATES]

    def template_spec(self) -> dict[str, str]:
        return {
            "LaunchTemplateId": self.template.template_id,
            "LaunchTemplateName": self.template.name,
            "Version": self.template_version,
        }

    def describe(self, region: str, account: str) -> dict[str, Any]:
        """One ``AutoScalingGroups[]`` element of DescribeAutoScalingGroups: a new dict and ``Instances`` list each
        time, their elements shared between calls of one revision (read them, do not change them)."""
        if self._described is None or self._described[0] != self.revision:
            self._described = (self.revision, self._describe(region, account))
        out = dict(self._described[1])
        out["Instances"] = list(out["Instances"])
        return out

    def _describe(self, region: str, account: str) -> dict[str, Any]:
        if self._static is None:
            self._static = self._static_part(region, account)
        out = dict(self._static)
        out["MinSize"], out["MaxSize"], out["DesiredCapacity"] = self.min_size, self.max_size, self.desired
        out["Instances"] = [i.group_entry(self.template.name) for i in self.members.values()]
        return out

    def _static_part(self, region: str, account: str) -> dict[str, Any]:
        """What never changes in the group's description (its sizes and instances are filled in per revision)."""
        out: dict[str, Any] = {
            "AutoScalingGroupName": self.name,
            "AutoScalingGroupARN": (
                f"arn:aws:autoscaling:{region}:{account}:autoScalingGroup:{self.group_id}:"
                f"autoScalingGroupName/{self.name}"
            ),
            "MinSize": self.min_size,
            "MaxSize": self.max_size,
            "DesiredCapacity": self.desired,
            "DefaultCooldown": 300,
            "AvailabilityZones": list(self.zones),
            "LoadBalancerNames": [],
            "TargetGroupARNs": [],
            "HealthCheckType": "EC2",
            "HealthCheckGracePeriod": 0,
            "Instances": [],
            "CreatedTime": self.created,
            "SuspendedProcesses": [],
            "VPCZoneIdentifier": ",".join(f"subnet-{z}" for z in self.zones),
            "EnabledMetrics": [],
            "Tags": [
                {
                    "ResourceId": self.name,
                    "ResourceType": "auto-scaling-group",
                    "Key": k,
                    "Value": v,
                    "PropagateAtLaunch": True,
                }
                for k, v in sorted(self.tags.items())
            ],
            "TerminationPolicies": ["Default"],
            "NewInstancesProtectedFromScaleIn": False,
            "CapacityRebalance": False,
        }
        if self.spot:
            out["MixedInstancesPolicy"] = {
                "LaunchTemplate": {
                    "LaunchTemplateSpecification": self.template_spec(),
                    "Overrides": [{"InstanceType": self.instance_type}],
                },
                "InstancesDistribution": {
                    "OnDemandAllocationStrategy": "prioritized",
                    "OnDemandBaseCapacity": 0,
                    "OnDemandPercentageAboveBaseCapacity": 0,
                    "SpotAllocationStrategy": "capacity-optimized",
                },
            }
        else:
            out["LaunchTemplate"] = self.template_spec()
        return out


InstanceCallback = Callable[["Instance"], None]


def _nothing(_: Instance) -> None:
    """The default instance callback: nothing."""
