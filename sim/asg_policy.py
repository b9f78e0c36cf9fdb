"""Auto Scaling's choices, pure: where the next instance launches, which instance a scale-in terminates, how long a
group waits after failed launches, and when a capacity outage refuses a launch.

Followed documentation (EC2 Auto Scaling User Guide): "Control which Auto Scaling instances terminate during scale
in" (default termination policy: the AZ with the most instances, then the instances of the oldest launch template
version, then at random; instances protected from scale in are never chosen), "Rebalancing activities" (a multi-AZ
group launches in the AZ with the fewest instances; an AZ that cannot launch is skipped for another), "Troubleshoot
Amazon EC2 Auto Scaling: instance launch failure" (failed launches are retried with a growing interval; here 10 s
doubling up to 300 s).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from sim.aws_state import Instance

LAUNCH_BACKOFF_SECONDS = (10.0, 300.0)  # first retry, cap
# StatusMessage of a failed launch: Spot, and On-Demand (InsufficientInstanceCapacity, "Troubleshoot Amazon EC2 Auto
# Scaling: EC2 instance launch failures").
SPOT_NO_CAPACITY = "There is no Spot capacity available that matches your request."
ON_DEMAND_NO_CAPACITY = (
    "We currently do not have sufficient {type} capacity in the Availability Zone you requested ({zone}). Our system "
    "will be working on provisioning additional capacity."
)


@dataclass(frozen=True)
class Outage:
    """No launch in ``target`` (an AZ, or a pool ``(instance type, AZ)``) while ``start <= t < end``."""

    target: str | tuple[str, str]
    start: float
    end: float

    def covers(self, pool: tuple[str, str], t: float) -> bool:
        return self.start <= t < self.end and (self.target == pool or self.target == pool[1])


def launch_zone(
    zones: Sequence[str], instance_type: str, active: Sequence[Instance], outages: Sequence[Outage], t: float
) -> str | None:
    """The AZ of the next launch: of ``zones`` with capacity at ``t``, the one with the fewest active instances (the
    first listed on a tie); None when no AZ has capacity."""
    counts = dict.fromkeys(zones, 0)
    for inst in active:
        counts[inst.zone] = counts.get(inst.zone, 0) + 1
    usable = [z for z in zones if not any(o.covers((instance_type, z), t) for o in outages)]
    return min(usable, key=lambda z: counts[z]) if usable else None


def scale_in_victims(
    active: Sequence[Instance], extra: int, current_version: str, rng: random.Random
) -> list[Instance]:
    """The ``extra`` instances a scale-in terminates, in order, by the default termination policy (``rng`` breaks
    the last tie)."""
    candidates = [i for i in active if not i.protected]
    victims: list[Instance] = []
    for _ in range(min(extra, len(candidates))):
        per_zone: dict[str, int] = {}
        for inst in candidates:
            per_zone[inst.zone] = per_zone.get(inst.zone, 0) + 1
        zone = max(sorted(per_zone), key=lambda z: per_zone[z])
        in_zone = [i for i in candidates if i.zone == zone]
        oldest = [i for i in in_zone if i.template_version != current_version]
        victim = rng.choice(oldest or in_zone)
        candidates.remove(victim)
        victims.append(victim)
    return victims


def launch_backoff(failures: int) -> float:
    """Seconds before the next launch attempt after ``failures`` failed attempts in a row (>= 1)."""
    first, cap = LAUNCH_BACKOFF_SECONDS
    return min(cap, first * float(2 ** (max(1, failures) - 1)))


def no_capacity_message(spot: bool, instance_type: str, zone: str) -> str:
    """The ``StatusMessage`` of a launch that found no capacity."""
    return SPOT_NO_CAPACITY if spot else ON_DEMAND_NO_CAPACITY.format(type=instance_type, zone=zone)
