"""A group's ``ManagedGroup`` (``core.kops.managed_group``) made again only when what it is made of changed.

Every tick reads every group of the cluster, and each group's ``Tags`` (a kOps group has about ten) were turned into a
map and the group into a ``ManagedGroup`` anew: about 3 us a group, where comparing the fields it is made of to the
last tick's copy of them is under 0.5 us. ``group_info`` answers the ``ManagedGroup`` made last time for a group whose
name, ``Tags`` and ``AvailabilityZones`` are equal (``==``) to the copy kept with it, for the same cluster.

A copy is kept only when every value ``managed_group`` reads or turns into text is exactly a string (each tag's
``Key`` and ``Value``, the name, each zone): an equal value is then the same text (``True == 1``, but
``str(True) != str(1)``). Copies, not the lists answered: nothing answered later changes what was kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.kops import ManagedGroup, managed_group

# the cluster, copies of the tags and zones, the name and the ``ManagedGroup`` (None: not the cluster's) made of them
Seen = tuple[str, list[dict[str, Any]], list[str], str, ManagedGroup | None]


def group_info(raw: Mapping[str, Any], cluster: str, last: Seen | None) -> tuple[ManagedGroup | None, Seen | None]:
    """``managed_group(raw, cluster)`` and what to pass as ``last`` next time for this group (None: nothing kept);
    ``last``'s answer when ``raw`` has equal fields. Raises as ``managed_group`` does."""
    tags, zones, name = raw.get("Tags", []), raw.get("AvailabilityZones", []), raw.get("AutoScalingGroupName")
    if last is not None and last[0] == cluster and last[3] == name and last[1] == tags and last[2] == zones:
        return last[4], last
    info = managed_group(raw, cluster)
    text = (
        type(name) is str
        and type(tags) is list
        and type(zones) is list
        and all(type(z) is str for z in zones)
        and all(type(t) is dict and type(t["Key"]) is str and type(t.get("Value", "")) is str for t in tags)
    )
    return info, ((cluster, [dict(t) for t in tags], list(zones), str(name), info) if text else None)
