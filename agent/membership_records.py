"""The membership reporter's pure part (``agent.membership``): nodes and the instance -> Auto Scaling group map in,
``NODE#`` records out, and when a written record is due again.

``node_identity``, ``listed_instances``, ``node_roles``, ``node_record``, ``membership_records``,
``instances_to_forget``, ``batches``, ``same_content``, ``refresh_age_seconds``, ``refresh_due``, ``due_at``,
``same_basis``, ``unchanged``. Node -> instance comes from ``spec.providerID`` (``aws:///<az>/<instance-id>``), never
from the node's name.
"""

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime, timedelta
from operator import attrgetter
from typing import Any, cast

from agent.asglookup import spread
from agent.kube.views import NodeView
from core.model import NodeRecord, parse_provider_id

INSTANCE_GROUP_LABEL = "kops.k8s.io/instancegroup"
ROLE_LABEL_PREFIX = "node-role.kubernetes.io/"
_PROVIDER_ID = attrgetter("provider_id")  # of a NodeView
LEGACY_ROLE_LABEL = "kubernetes.io/role"  # kOps still sets it: "master" or "node"


def node_identity(node: NodeView) -> tuple[str, str] | None:
    """(availability zone, instance id) from the node's ``spec.providerID``, None when it has no AWS one. Pure."""
    return parse_provider_id(node.provider_id)


def listed_instances(
    page: list[NodeView],
    known: dict[str, str],
    identity: Callable[[NodeView], tuple[str, str] | None] = node_identity,
) -> tuple[list[NodeView], list[str]]:
    """The nodes of ``page`` with an AWS providerID and their instance ids, in order. ``known`` (providerID ->
    instance id) answers the providerIDs seen before, a look-up a node in C, and learns the others from ``identity``
    (``node_identity``, or a caller's that also logs a node without one); a node it answers None is left out."""
    ids = list(map(known.get, map(_PROVIDER_ID, page)))
    if all(ids):  # instance ids are never empty
        return page, cast(list[str], ids)
    listed: list[NodeView] = []
    found: list[str] = []
    for node, instance_id in zip(page, ids, strict=True):
        if instance_id is None:
            parsed = identity(node)
            if parsed is None:
                continue
            instance_id = known[node.provider_id] = parsed[1]
        listed.append(node)
        found.append(instance_id)
    return listed, found


def node_roles(labels: Mapping[str, str] | None) -> list[str]:
    """Roles from ``node-role.kubernetes.io/<role>`` labels and kOps' legacy ``kubernetes.io/role``; sorted. Pure.

    >>> node_roles({"node-role.kubernetes.io/control-plane": "", "kubernetes.io/role": "master"})
    ['control-plane', 'master']
    """
    labels = labels or {}
    roles = {key[len(ROLE_LABEL_PREFIX) :] for key in labels if key.startswith(ROLE_LABEL_PREFIX)}
    if labels.get(LEGACY_ROLE_LABEL):
        roles.add(labels[LEGACY_ROLE_LABEL])
    roles.discard("")
    return sorted(roles)


def node_record(node: NodeView, asg_name: str | None, now: datetime) -> NodeRecord | None:
    """The membership record of one node, or None when it has no AWS providerID. Pure."""
    identity = node_identity(node)
    if identity is None:
        return None
    az, instance_id = identity
    return NodeRecord(
        instance_id=instance_id,
        node_name=node.name,
        availability_zone=az,
        asg_name=asg_name,
        ready=node.ready,
        unschedulable=node.unschedulable,
        ending=node.ending,
        roles=node_roles(node.labels),
        instance_group=node.labels.get(INSTANCE_GROUP_LABEL),
        reported_at=now,
    )


def membership_records(
    nodes: Iterable[NodeView], asg_by_instance: Mapping[str, str | None], now: datetime
) -> list[NodeRecord]:
    """Records for every node with an AWS providerID; ``asg_by_instance`` maps instance id → ASG name (None: in
    no group, e.g. detached). Pure."""
    records = []
    for node in nodes:
        identity = node_identity(node)
        record = None if identity is None else node_record(node, asg_by_instance.get(identity[1]), now)
        if record is not None:
            records.append(record)
    return records


def instances_to_forget(recorded: Mapping[str, datetime], current: Iterable[str], listed_at: datetime) -> set[str]:
    """Instance ids whose ``NODE#`` item names no node of the list taken at ``listed_at``. Pure.

    Args:
        recorded: instance id -> ``reported_at`` of its item.
        current: instance ids of the listed nodes.
        listed_at: when the list was asked for; an item written since (by another agent replica following its
            watch) is newer than the list's evidence and is kept.
    """
    present = set(current)
    return {iid for iid, reported_at in recorded.items() if iid not in present and reported_at < listed_at}


def batches(items: list[str], size: int) -> Iterator[list[str]]:
    """Consecutive slices of at most ``size`` items."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


# every NodeRecord field but its times: what ``same_content`` compares (a tuple of the values, built in C)
_CONTENT = attrgetter(*(name for name in NodeRecord.model_fields if name not in ("reported_at", "confirmed_at")))


def same_content(a: NodeRecord, b: NodeRecord) -> bool:
    """Two records that differ at most in ``reported_at`` (no need to write again between resyncs): their other
    fields compared as values (what comparing their ``model_dump`` without the times says, without building two
    dicts: a record's fields are strings, booleans, None and a list of strings). A subclass (fields of its own)
    is compared by its dump."""
    if type(a) is NodeRecord and type(b) is NodeRecord:
        return bool(_CONTENT(a) == _CONTENT(b))
    times = {"reported_at", "confirmed_at"}
    return a.model_dump(exclude=times) == b.model_dump(exclude=times)


def refresh_age_seconds(instance_id: str, ttl_seconds: float, resync_seconds: float) -> float:
    """Age (seconds) at which an unchanged item is written again. Pure.

    Between half and all of ``ttl_seconds - 2 * resync_seconds``, at a fraction fixed per instance (CRC-32 of its
    id), so items written at once are refreshed over many resyncs. A resync comes at most ``resync_seconds`` after
    the item becomes due, so it is written again at least one resync before its TTL lapses; when the TTL is shorter
    than two resyncs it is 0 (written every resync).
    """
    return spread(instance_id, max(0.0, ttl_seconds - 2 * resync_seconds))


def refresh_due(written: NodeRecord, now: datetime, ttl_seconds: float, resync_seconds: float) -> bool:
    """Whether the item holding ``written`` is old enough to be written again (``refresh_age_seconds``). Pure."""
    age = (now - written.reported_at).total_seconds()
    return age >= refresh_age_seconds(written.instance_id, ttl_seconds, resync_seconds)


def due_at(reported_at: datetime, age_seconds: float) -> datetime:
    """The first instant (to the microsecond) at which an item reported at ``reported_at`` has reached
    ``age_seconds``: ``now >= due_at(r, a)`` exactly when ``(now - r).total_seconds() >= a`` (``refresh_due``'s
    test, float rounding included), so a resync compares two times instead of subtracting them. Pure.

    >>> due_at(datetime(2026, 1, 1), 1.5)
    datetime.datetime(2026, 1, 1, 0, 0, 1, 500000)
    """
    micros = math.ceil(age_seconds * 1e6)
    while timedelta(microseconds=micros - 1).total_seconds() >= age_seconds:
        micros -= 1
    while timedelta(microseconds=micros).total_seconds() < age_seconds:
        micros += 1
    return reported_at + timedelta(microseconds=micros)


# (the node's view and fields last compared, its group, when its item is due again): what an item was last found to
# match (``MembershipReporter._basis``)
Basis = tuple[NodeView, tuple[Any, ...], str | None, datetime]


def same_basis(basis: Basis | None, node: NodeView, asg_name: str | None) -> bool:
    """Whether ``node`` and its group are as last compared (``basis``), whenever its item is due. Pure."""
    return (
        basis is not None
        and basis[2] == asg_name
        and (
            basis[0] is node  # the same (frozen) view again: a list answered from a cache
            or basis[1] == (node.name, node.provider_id, node.ready, node.unschedulable, node.ending, node.labels)
        )
    )


def unchanged(
    basis: Basis | None,
    node: NodeView,
    asg_name: str | None,
    now: datetime,
) -> bool:
    """Whether ``node`` and its group are as last compared (``basis``) and its item is not due: nothing to write.
    Pure."""
    return basis is not None and same_basis(basis, node, asg_name) and now < basis[3]


# -- I/O -------------------------------------------------------------------------------------------------------
