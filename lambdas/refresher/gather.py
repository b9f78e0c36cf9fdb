"""Reading the cluster's groups for the refresher from AWS, through the adapters' ports (kept out of ``world`` so
the decider imports no adapter), and what an execution environment keeps between its reads (``GatherMemo``).

Every refresher pass reads every group with its instances (DescribeAutoScalingGroups), a thousand instances in a large
cluster, and most of them are as the pass before found them. ``InstanceFacts`` is frozen, so the same facts are one
object: ``GatherMemo.facts`` keeps each instance's facts keyed by all they hold (its id, zone, lifecycle state,
template version and launch time), and a pass makes only those of instances that changed (building a frozen dataclass
was four fifths of ``read_groups`` at 1,000 instances). Keyed by content, never by an object's identity; bounded
(``MEMO_INSTANCES``).

A pass of a refresh changes one group at a time: the others answer the same ``Instances`` as the pass before. So
``GatherMemo.groups`` keeps, per group name, the last ``Instances`` list read without launch facts and the facts made
of it, and a list equal to it (``==``: each entry's map key by key, in C) is answered with those facts without a
look-up an instance, and with the same ``GroupFacts`` (``GatherMemo.made``) when its sizes are the same too (what that
worked out, its live instances and its index by id, is kept with it). A list that changed (the group being refreshed:
a spare launched, an old instance gone) keeps the facts of the entries equal to the last list's entries they line up
with (``_aligned``: an entry dropped or inserted here and there); only the others are looked up (and looked at for
text). Only a list whose fields the facts are made of are all strings is kept, so that equal means the same text
(``True == 1``, but ``str(True) != str(1)``). It holds the answer it was made of, never a copy, and never changes it;
one entry a group of the last read. That relies on the port answering a new list each call and new entries for what
changed, never an entry changed in place (boto3 parses every answer anew; the simulation's Auto Scaling shares an
entry only within one revision of its group); the same list object answered again is read anew.

Most groups answer as the last read did, sizes and tags too: ``GatherMemo.answers`` keeps each one's last answer (when
its name, zones and tags are text as well) with the group it is (``managed_group``), and an answer whose values but its
instances are equal to it (``==``; a new dict) is that group, its tags not read again; with its instances as before too
(above), it is the same facts, not made and compared again. A size is equal only to an equal number, which ``int``
makes the same size.

**Whose memo.** A ``GatherMemo`` belongs to one execution environment: the refresher's ``Deps`` make one
(``handler.Deps.gather_memo``, as its membership memo ``Deps.memo``), a warm Lambda keeps it between invocations and a
cold start begins with an empty one; nothing is kept in the module, so two environments (or two ``Deps`` in one
process: the simulation's, tests') never see each other's last reads. Every memo is keyed by content, so a read
answers the same whatever the memo holds: what it holds only decides how much is made anew.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from itertools import compress, count, islice
from operator import eq, not_
from typing import Any

from adapters.aws.ports import Ec2Port, GroupReader
from core.kops import ManagedGroup, managed_group
from core.model import NodeRecord
from lambdas.refresher.world import GroupFacts, InstanceFacts

MEMO_INSTANCES = 20_000  # the most instances' facts ``GatherMemo.facts`` keeps before it starts again


@dataclass(eq=False)
class GatherMemo:
    """What one execution environment of the refresher keeps between its reads of the world (module docstring): made
    with its ``Deps``, never shared with another's. Its maps and lists are the memo's: only ``read_groups`` and
    ``world_read.gather`` change them.

    Attributes:
        facts: what an instance's facts hold -> those facts (at most ``MEMO_INSTANCES``).
        groups: group name -> its ``Instances`` as last read without launch facts, and the facts made of them.
        made: group name -> the last read's facts of it (of the groups ``groups`` keeps the list of).
        answers: group name -> the last read's answer of it, the group it is and the cluster it was read for (of the
            groups ``made`` keeps the facts of, when its name, zones and tags are text): an answer equal to it but
            for its instances is that group.
        ready_nodes: the nodes map of the last world ``world_read.gather`` made (held: never another object at its
            address); ready_live: the Ready ids its passes found by group (``World.ready_live``): a world of the same
            map shares them. Only the membership memo's own map comes again (``NodeRecordMemo.by_instance``, never
            changed; any other list is keyed anew), in a pass after a reused read.
    """

    facts: dict[tuple[Any, ...], InstanceFacts] = field(default_factory=dict)
    groups: dict[str, tuple[list[dict[str, Any]], tuple[InstanceFacts, ...]]] = field(default_factory=dict)
    made: dict[str, GroupFacts] = field(default_factory=dict)
    answers: dict[str, tuple[dict[str, Any], ManagedGroup, str]] = field(default_factory=dict)
    ready_nodes: Mapping[str, NodeRecord] | None = None
    ready_live: dict[str, tuple[GroupFacts, list[str]]] = field(default_factory=dict)


_NONE = object()  # a key an answer does not hold


def _template_spec(asg: dict[str, Any]) -> dict[str, Any] | None:
    """The group's launch template specification: ``LaunchTemplate`` or the MixedInstancesPolicy's."""
    if asg.get("LaunchTemplate"):
        return dict(asg["LaunchTemplate"])
    policy = asg.get("MixedInstancesPolicy") or {}
    spec = (policy.get("LaunchTemplate") or {}).get("LaunchTemplateSpecification")
    return dict(spec) if spec else None


def read_groups(
    autoscaling: GroupReader, ec2: Ec2Port, cluster: str, memo: GatherMemo, *, with_launch_facts: bool = False
) -> dict[str, GroupFacts]:
    """The cluster's managed groups as ``GroupFacts``, made anew only where ``memo`` (the execution environment's)
    holds nothing equal; a read without launch facts keeps what it read in ``memo`` (module docstring).

    Calls: DescribeAutoScalingGroups (1 per 100 groups); with ``with_launch_facts`` also DescribeInstances
    (1 per 200 instances, for launch times) and DescribeLaunchTemplates (1, to resolve ``$Latest`` and
    ``$Default`` to version numbers).
    """
    raw = autoscaling.cluster_groups(cluster)
    versions: dict[str, tuple[str, str]] = {}
    times: dict[str, datetime] = {}
    if with_launch_facts:
        ids = [
            spec["LaunchTemplateId"]
            for spec in (_template_spec(g) for g in raw)
            if spec and spec.get("LaunchTemplateId")
        ]
        versions = ec2.template_versions(ids)
        times = ec2.launch_times([i["InstanceId"] for g in raw for i in g.get("Instances", [])])
    out: dict[str, GroupFacts] = {}
    kept: dict[str, tuple[list[dict[str, Any]], tuple[InstanceFacts, ...]]] = {}
    answers: dict[str, tuple[dict[str, Any], ManagedGroup, str]] = {}
    for asg in raw:
        named = asg.get("AutoScalingGroupName")
        known = None if with_launch_facts or not isinstance(named, str) else memo.answers.get(named)
        # the group as the last read answered it but for its instances (looked at below): its tags not read again
        same = known is not None and known[0] is not asg and known[2] == cluster and _same_but_instances(known[0], asg)
        group = known[1] if known is not None and same else managed_group(asg, cluster)
        if group is None:
            continue
        version = None
        spec = _template_spec(asg)
        if spec and spec.get("LaunchTemplateId") in versions:
            default, latest = versions[spec["LaunchTemplateId"]]
            wanted = spec.get("Version") or "$Default"
            version = latest if wanted == "$Latest" else default if wanted == "$Default" else str(wanted)
        listed = asg.get("Instances", [])
        last = memo.groups.get(group.name)
        if not times and last is not None and last[0] is not listed and last[0] == listed:
            instances = last[1]  # equal to text: text (only a str equals a str)
            kept[group.name] = (listed, instances)
        elif not times and last is not None and last[0] is not listed and isinstance(listed, list):
            # a changed group (the one a pass refreshes): an entry equal to the last list's entry it lines up with
            # keeps that entry's facts (``_aligned``); only the others are made (and looked at for text)
            instances, made = _aligned(listed, last[0], last[1], memo.facts)
            if all(map(_as_text, made)):
                kept[group.name] = (listed, instances)
        else:
            instances = tuple(_facts(i, times, memo.facts) for i in listed)
            if not times and isinstance(listed, list) and all(map(_as_text, listed)):
                kept[group.name] = (listed, instances)
        before = memo.made.get(group.name)
        if same and before is not None and before.instances is instances:  # its sizes and instances as before too
            out[group.name], answers[group.name] = before, (asg, group, cluster)
            continue
        facts = GroupFacts(
            name=group.name,
            role=group.role,
            instance_group=group.instance_group,
            min_size=int(asg["MinSize"]),
            max_size=int(asg["MaxSize"]),
            desired=int(asg["DesiredCapacity"]),
            instances=instances,
            launch_template_version=version,
        )
        # the same facts as the last read's: that object, with what it worked out (``GroupFacts.live``, its index)
        out[group.name] = before if before is not None and before.instances is instances and before == facts else facts
        if group.name in kept and _as_text_group(asg):
            answers[group.name] = (asg, group, cluster)
    if not with_launch_facts:
        memo.groups = kept
        memo.made = {name: out[name] for name in kept}
        memo.answers = answers
    return out


def _same_but_instances(known: dict[str, Any], asg: dict[str, Any]) -> bool:
    """Whether ``asg`` holds the keys ``known`` holds, each value but ``Instances`` equal (``==``, in C)."""
    return len(known) == len(asg) and all(key == "Instances" or known.get(key, _NONE) == v for key, v in asg.items())


def _as_text_group(asg: dict[str, Any]) -> bool:
    """Whether what ``managed_group`` reads of ``asg`` besides its sizes is text: its name, zones and tags' keys and
    values (its instances are looked at by ``_as_text``), so that an answer equal to it means the same group
    (``GatherMemo.answers``)."""
    tags, zones = asg.get("Tags", []), asg.get("AvailabilityZones", [])
    if type(asg.get("AutoScalingGroupName")) is not str or type(tags) is not list or type(zones) is not list:
        return False
    if not all(type(zone) is str for zone in zones):
        return False
    return all(type(tag) is dict and type(tag.get("Key")) is str and type(tag.get("Value")) is str for tag in tags)


def _aligned(
    listed: list[dict[str, Any]],
    last: list[dict[str, Any]],
    facts: tuple[InstanceFacts, ...],
    memo: dict[tuple[Any, ...], InstanceFacts],
) -> tuple[tuple[InstanceFacts, ...], list[dict[str, Any]]]:
    """The facts of ``listed``, and the entries made anew: ``listed`` walked along ``last`` (whose facts are
    ``facts``), each run of entries equal (``==``, compared in C until the first that is not) to the last list's at
    the place they line up with keeping those facts; at an entry that is not, the last list's entry dropped there (the
    next one equal to it), or this entry inserted (the next one equal to the last list's), or else this entry changed
    (the facts of an entry inserted or changed made by ``_facts`` with ``memo``). A group's list changes by an instance
    or two a pass (a spare launched at its end, an old instance gone)."""
    out: list[InstanceFacts] = []
    made: list[dict[str, Any]] = []
    n, m, i, j = len(listed), len(last), 0, 0
    while i < n:
        unequal = map(not_, map(eq, islice(listed, i, None), islice(last, j, None)))
        run = next(compress(count(), unequal), min(n - i, m - j))  # (j <= m throughout)
        out += facts[j : j + run]
        i, j = i + run, j + run
        if i >= n:
            break
        if j + 1 < m and last[j + 1] == listed[i]:
            j += 1  # the last list's entry ``j`` is gone
            continue
        made.append(listed[i])
        out.append(_facts(listed[i], {}, memo))
        inserted = j >= m or (i + 1 < n and listed[i + 1] == last[j])  # (past the last list's end: all inserted)
        i, j = i + 1, j if inserted else j + 1
    return tuple(out), made


def _as_text(instance: Any) -> bool:
    """Whether the fields ``_facts`` reads of ``instance`` without launch times are strings (or no version); each
    field looked at in line (a generator over them was half of this, run on a thousand instances a pass)."""
    if type(instance) is not dict:
        return False
    get = instance.get
    if type(get("InstanceId")) is not str or type(get("AvailabilityZone")) is not str:
        return False
    if type(get("LifecycleState")) is not str:
        return False
    template = get("LaunchTemplate")
    return not template or (type(template) is dict and type(template.get("Version", "")) is str)


def _facts(
    instance: dict[str, Any], times: dict[str, datetime], memo: dict[tuple[Any, ...], InstanceFacts]
) -> InstanceFacts:
    """An instance of DescribeAutoScalingGroups' ``Instances`` as ``InstanceFacts``, made once for what it holds
    (``memo``, a ``GatherMemo.facts``: emptied when it holds ``MEMO_INSTANCES``; a launch time with its UTC offset:
    times equal as instants in other zones are not the same facts)."""
    template = instance.get("LaunchTemplate") or {}
    launched = times.get(instance["InstanceId"])
    key = (
        instance["InstanceId"],
        instance.get("AvailabilityZone", ""),
        instance.get("LifecycleState", ""),
        str(template["Version"]) if template.get("Version") else None,
        launched,
        None if launched is None else launched.utcoffset(),
    )
    facts = memo.get(key)
    if facts is None:
        if len(memo) >= MEMO_INSTANCES:
            memo.clear()
        facts = memo[key] = InstanceFacts(
            instance_id=key[0],
            availability_zone=key[1],
            lifecycle_state=key[2],
            launch_template_version=key[3],
            launch_time=launched,
        )
    return facts
