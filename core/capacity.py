"""Bounded replay: every DesiredCapacity and MaxSize the Lambdas send to Auto Scaling is clamped, right before the
call, to limits derived from the settings and from what Auto Scaling itself reports, whatever the table says.

The table (``COMP#``, ``RUN#``) records absolute targets so a redo after a crash is harmless; anything that can
write the table could then make a Lambda scale a group to any size. The clamp closes that (DESIGN.md, invariant 9):

- a donor of the replenisher: MaxSize and desired at most ``floor(original MaxSize x DONOR_MAX_SIZE_FACTOR)``
  (``donor_limit``);
- a group the refresher surges: at most ``original MaxSize + REFRESH_MAX_SURGE`` (``surge_limit``);
- any group: desired at least its MinSize, MaxSize at least its MinSize (Auto Scaling refuses both otherwise:
  UpdateAutoScalingGroup, "Desired capacity:<d> must be between the specified min size:<min> and max size:<max>").

The "original MaxSize" is the smaller of what the table recorded and what Auto Scaling reports now: a forged record
can only lower the limit, never raise it past the factor of the group's real size. Pure: no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Bounds:
    """The limits one group's sizes are clamped to.

    Attributes:
        asg_name: the group.
        min_size: its MinSize as Auto Scaling reports it (desired and MaxSize never go below it).
        max_limit: the highest MaxSize and desired allowed (``donor_limit`` / ``surge_limit``).
        source: how ``max_limit`` was derived, for the log line.
    """

    asg_name: str
    min_size: int
    max_limit: int
    source: str = ""


@dataclass(frozen=True)
class Clamped:
    """The sizes to send, and why they differ from the ones asked (empty: unchanged)."""

    desired: int | None
    max_size: int | None
    reasons: tuple[str, ...] = ()

    @property
    def clamped(self) -> bool:
        return bool(self.reasons)


def original_max(recorded: int | None, reported: int) -> int:
    """The MaxSize a limit is derived from: the recorded original, never more than Auto Scaling reports now.

    >>> original_max(4, 8), original_max(1000, 4), original_max(None, 4)
    (4, 4, 4)
    """
    return reported if recorded is None else max(0, min(recorded, reported))


def donor_limit(recorded_max: int | None, reported_max: int, factor: float) -> int:
    """``floor(original MaxSize x factor)`` (``DONOR_MAX_SIZE_FACTOR``), never below the original.

    >>> donor_limit(4, 8, 2.0), donor_limit(10**6, 4, 2.0), donor_limit(3, 3, 1.5)
    (8, 8, 4)
    """
    base = original_max(recorded_max, reported_max)
    return max(base, math.floor(base * factor))


def surge_limit(recorded_max: int | None, reported_max: int, max_surge: int) -> int:
    """``original MaxSize + max surge`` (``REFRESH_MAX_SURGE``).

    >>> surge_limit(4, 5, 1), surge_limit(500, 4, 1)
    (5, 5)
    """
    return original_max(recorded_max, reported_max) + max(0, max_surge)


def surge_bounds(asg_name: str, min_size: int, recorded_max: int | None, reported_max: int, max_surge: int) -> Bounds:
    """The refresher's ``Bounds`` for a group it surges: MaxSize and desired at most original MaxSize + max surge.

    >>> surge_bounds("nodes-a", 2, 4, 5, 1)
    Bounds(asg_name='nodes-a', min_size=2, max_limit=5, source='original MaxSize 4 + REFRESH_MAX_SURGE 1')
    """
    return Bounds(
        asg_name=asg_name,
        min_size=min_size,
        max_limit=surge_limit(recorded_max, reported_max, max_surge),
        source=f"original MaxSize {original_max(recorded_max, reported_max)} + REFRESH_MAX_SURGE {max_surge}",
    )


def clamp(desired: int | None, max_size: int | None, bounds: Bounds) -> Clamped:
    """The DesiredCapacity and MaxSize to send (None: not sent), within ``bounds``.

    >>> b = Bounds("nodes-b", min_size=1, max_limit=8)
    >>> clamp(3, None, b)
    Clamped(desired=3, max_size=None, reasons=())
    >>> c = clamp(10**6, 10**6, b); (c.desired, c.max_size)
    (8, 8)
    >>> clamp(0, None, b).desired  # below MinSize: Auto Scaling would refuse it
    1
    """
    reasons = []
    if max_size is not None:
        if max_size > bounds.max_limit:
            reasons.append(f"MaxSize {max_size} above the limit {bounds.max_limit} ({bounds.source or 'settings'})")
            max_size = bounds.max_limit
        if max_size < bounds.min_size:
            reasons.append(f"MaxSize {max_size} below MinSize {bounds.min_size}")
            max_size = bounds.min_size
    if desired is not None:
        ceiling = bounds.max_limit if max_size is None else min(bounds.max_limit, max_size)
        if desired > ceiling:
            reasons.append(f"desired {desired} above {ceiling} ({bounds.source or 'settings'})")
            desired = ceiling
        if desired < bounds.min_size:
            reasons.append(f"desired {desired} below MinSize {bounds.min_size}")
            desired = bounds.min_size
    return Clamped(desired, max_size, tuple(reasons))
