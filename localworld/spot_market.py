"""Spot Instances in moto: which instances EC2 reports with ``InstanceLifecycle: spot``.

moto marks an instance Spot only when RunInstances names ``InstanceMarketOptions``; instances an Auto Scaling group
launches are always On-Demand in its answers, even for a MixedInstancesPolicy with no On-Demand capacity. AWS
launches those as Spot Instances, and the interruption Lambda acts on a Spot warning only for an instance EC2 reports
as Spot (``lambdas.interruption.verify``). So:

- ``install()`` wraps moto's ``FakeAutoScalingGroup.replace_autoscaling_group_instances`` (what launches a group's
  instances) once per process: each instance launched by a group that ``all_spot`` says is all Spot is marked
  ``spot``. moto runs in this process (``ThreadedMotoServer``, or ``mock_aws`` in a test); ``moto.reset`` keeps the
  wrap (it is on the class).
- ``set_market`` marks chosen instances (a test's cluster of Spot groups, or an On-Demand one among them).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

from moto.autoscaling.models import FakeAutoScalingGroup
from moto.backends import get_backend

from localworld.eventbus import DEFAULT_ACCOUNT

SPOT = "spot"
_MARKER = "_node_manager_spot_market"


def all_spot(group: Any) -> bool:
    """True when the moto group's MixedInstancesPolicy asks for no On-Demand capacity (base 0, 0 % above it)."""
    policy = getattr(group, "mixed_instances_policy", None) or {}
    distribution = policy.get("InstancesDistribution") or {}
    if not policy:
        return False
    return (
        int(distribution.get("OnDemandBaseCapacity", 0) or 0) == 0
        and int(distribution.get("OnDemandPercentageAboveBaseCapacity", 100)) == 0
    )


def install() -> None:
    """Make moto's groups launch Spot Instances where ``all_spot`` says so (idempotent, process-wide)."""
    original = FakeAutoScalingGroup.replace_autoscaling_group_instances
    if getattr(original, _MARKER, False):
        return

    @functools.wraps(original)
    def launching(self: Any, count_needed: int, propagated_tags: dict[str, str]) -> None:
        known = {state.instance.id for state in self.instance_states}
        original(self, count_needed, propagated_tags)
        if all_spot(self):
            for state in self.instance_states:
                if state.instance.id not in known:
                    state.instance.lifecycle = SPOT

    setattr(launching, _MARKER, True)
    FakeAutoScalingGroup.replace_autoscaling_group_instances = launching  # type: ignore[method-assign]  # the shim


def set_market(
    instance_ids: Iterable[str], market: str | None = SPOT, *, account: str = DEFAULT_ACCOUNT, region: str = "us-east-1"
) -> None:
    """Mark moto's instances ``market`` (``spot``; None: On-Demand, no ``InstanceLifecycle``).

    Raises:
        moto's ``InvalidInstanceIdError``: an id moto does not know.
    """
    backend = get_backend("ec2")[account][region]
    for instance_id in instance_ids:
        backend.get_instance(instance_id).lifecycle = market
