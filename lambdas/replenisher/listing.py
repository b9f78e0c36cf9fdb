"""A group's ``Instances`` as ``gather`` reads them: the ``Instance`` objects, their keys and the ids InService, made
again only for entries that changed (``GroupInstances``, kept in ``gather.GatherMemo.groups``). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lambdas.replenisher.world import IN_SERVICE, Instance

InstanceKey = tuple[str, str, str, str]  # an ``Instance``'s id, zone, lifecycle state and health, as read


@dataclass(frozen=True)
class GroupInstances:
    """One group's ``Instances`` as DescribeAutoScalingGroups answered them (the list itself, never a copy, never
    changed) and what ``gather`` made of them: the ``Instance`` objects, their keys and the ids of those InService.

    Kept only when every field an ``Instance`` is made of is a string (or a health status absent), so that an equal
    list (``==``) holds the same text (``True == 1``; ``str(True) != str(1)``). It relies on the port answering a new
    list each call and new entries for what changed, never an entry changed in place (boto3 parses every answer
    anew; the simulation's Auto Scaling shares an entry only within one revision of its group); the same list object
    answered again is read anew.
    """

    listed: list[dict[str, Any]] | None  # None: not all text, not kept
    instances: tuple[Instance, ...]
    keys: tuple[InstanceKey, ...]
    in_service: tuple[str, ...]


def group_instances(listed: Any, known: Mapping[InstanceKey, Instance]) -> GroupInstances:
    """What ``gather`` makes of a group's ``Instances`` entries (an ``Instance`` of the four fields each, the one in
    ``known`` when it has those), with ``listed`` kept only when every such field is a string (else None: never
    answered again by equality, ``GroupInstances``)."""
    instances, keys, in_service = [], [], []
    text = type(listed) is list
    for inst in listed:
        fields = (inst["InstanceId"], inst.get("AvailabilityZone", ""), inst.get("LifecycleState", ""))
        health = inst.get("HealthStatus", "Healthy")
        # four type checks in line (a generator here was two fifths of this loop); text: the fields themselves
        if (
            text
            and type(fields[0]) is str
            and type(fields[1]) is str
            and type(fields[2]) is str
            and type(health) is str
        ):
            key = (*fields, health)
        else:
            text = False
            key = (str(fields[0]), str(fields[1]), str(fields[2]), str(health))
        instance = known.get(key)
        if instance is None:
            instance = Instance(*key)
        instances.append(instance)
        keys.append(key)
        if instance.lifecycle_state == IN_SERVICE:
            in_service.append(instance.instance_id)
    return GroupInstances(listed if text else None, tuple(instances), tuple(keys), tuple(in_service))
