"""What the decision looks at: what AWS said about the instance, and what the table has recorded.

Plain frozen values, gathered by the handler (``gather.read_instance_facts`` and the ``Store``) and handed
to ``decide.decide``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.model import NodeRecord
from core.runs import Run


@dataclass(frozen=True)
class InstanceFacts:
    """What AWS said about one instance.

    Attributes:
        instance_id: the instance.
        known: False when EC2 does not know the id (DescribeInstances: ``InvalidInstanceID.NotFound`` or no
            reservation). Only asked when the instance is in no ASG, so True otherwise.
        asg: the instance's Auto Scaling group as one element of DescribeAutoScalingGroups'
            ``AutoScalingGroups`` (with ``Tags``); for an instance already detached by this system, the group
            named by its ``DETACH#`` record; None when there is none.
        lifecycle_state: DescribeAutoScalingInstances' ``LifecycleState`` (``InService``, ``Terminating:Wait``,
            ...); None when the instance is in no ASG now.
        state: DescribeInstances' ``State.Name`` (``running``, ``stopped``, ...); None when EC2 was not asked or
            does not know the id.
        market: DescribeInstances' ``InstanceLifecycle`` (``spot``, ...); empty for On-Demand or when not asked.
    """

    instance_id: str
    known: bool = True
    asg: Mapping[str, Any] | None = None
    lifecycle_state: str | None = None
    state: str | None = None
    market: str = ""

    @property
    def in_asg(self) -> bool:
        return self.lifecycle_state is not None


@dataclass(frozen=True)
class World:
    """Everything ``decide`` needs besides the notice, the clock and the settings.

    Attributes:
        instance: what AWS said about the instance.
        membership: the ``NODE#`` record of the instance, if any (``decide`` checks its age itself).
        command: the ``CMD#`` item of the command this notice would create, if already recorded.
        detach: the ``DETACH#`` item of the instance, if an early replacement was already recorded.
        hook: for a lifecycle action, the instance's ``HOOK#`` item, if any.
        commands: for a lifecycle action or a state change, the instance's ``CMD#`` items, newest first
            (``adapters.dynamo.commands.commands_for_instance``), those the rules can read
            (``decide.common.unreadable_command``); empty otherwise.
        active_run: for a Spot warning (any policy), and for a rebalance recommendation under
            ``REBALANCE_POLICY=replace``, the cluster's active refresh run (``RunStore.active``), if any; None
            otherwise.
        rebalance_cordons: for a rebalance recommendation under ``cordon``, ``drain`` or ``replace`` (first
            delivery), the other instances' rebalance commands in effect (``decide.rebalance.in_effect``: active or
            holding their cordon); 0 otherwise.
        cluster_nodes: for the same, the node count of the agent's last membership mark (``MEMBERSHIP`` item's
            ``nodes``); None when unknown or not read (no cap is applied then).
    """

    instance: InstanceFacts
    membership: NodeRecord | None = None
    command: Mapping[str, Any] | None = None
    detach: Mapping[str, Any] | None = None
    hook: Mapping[str, Any] | None = None
    commands: tuple[Mapping[str, Any], ...] = ()
    active_run: Run | None = None
    rebalance_cordons: int = 0
    cluster_nodes: int | None = None
