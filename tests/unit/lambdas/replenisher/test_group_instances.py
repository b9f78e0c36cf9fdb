"""``gather.group_instances``: a group's ``Instances`` list equal to the one read last is answered as read last (no
loop over its entries), anything else is read entry by entry exactly as before; the memo holds its own copy."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from lambdas.replenisher.gather import GroupInstances, group_instances
from lambdas.replenisher.world import Instance


def entry(n: int, state: str = "InService", health: Any = "Healthy", zone: Any = "us-east-1a") -> dict[str, Any]:
    return {
        "InstanceId": f"i-{n:017x}",
        "AvailabilityZone": zone,
        "LifecycleState": state,
        "HealthStatus": health,
        "LaunchTemplate": {"LaunchTemplateName": "nodes", "Version": "1"},
        "ProtectedFromScaleIn": False,
    }


def read_fresh(raw: list[dict[str, Any]]) -> GroupInstances:
    return group_instances(raw, None)


def test_an_equal_list_in_new_maps_is_answered_as_read_last() -> None:
    raw = [entry(1), entry(2, "Pending"), entry(3)]
    first = read_fresh(raw)
    again = group_instances(copy.deepcopy(raw), first)  # equal, not the same objects (boto3 parses anew each call)
    assert again is first
    assert first.instances == (
        Instance(f"i-{1:017x}", "us-east-1a", "InService", "Healthy"),
        Instance(f"i-{2:017x}", "us-east-1a", "Pending", "Healthy"),
        Instance(f"i-{3:017x}", "us-east-1a", "InService", "Healthy"),
    )
    assert first.in_service == (f"i-{1:017x}", f"i-{3:017x}")


@pytest.mark.parametrize(
    "change",
    ["state", "health", "zone", "added", "removed", "reordered", "other field"],
)
def test_any_change_is_read_as_a_fresh_read_reads_it(change: str) -> None:
    raw = [entry(1), entry(2), entry(3)]
    first = read_fresh(raw)
    changed = copy.deepcopy(raw)
    if change == "state":
        changed[1]["LifecycleState"] = "Terminating"
    elif change == "health":
        changed[1]["HealthStatus"] = "Unhealthy"
    elif change == "zone":
        changed[1]["AvailabilityZone"] = "us-east-1b"
    elif change == "added":
        changed.append(entry(4, "Pending"))
    elif change == "removed":
        del changed[0]
    elif change == "reordered":
        changed.reverse()
    else:  # a field the Instance does not have: read again, the same Instances
        changed[1]["ProtectedFromScaleIn"] = True
    again = group_instances(changed, first)
    assert again is not first
    assert again.instances == read_fresh(changed).instances and again.in_service == read_fresh(changed).in_service
    unchanged = {i.instance_id for i in first.instances} & {i.instance_id for i in again.instances} - {f"i-{2:017x}"}
    assert all(  # an entry whose four fields did not change: the Instance read last, shared
        next(i for i in again.instances if i.instance_id == iid)
        is next(i for i in first.instances if i.instance_id == iid)
        for iid in unchanged
    )


def test_the_memo_keeps_its_own_copy_of_the_answer() -> None:
    """A caller (or a port sharing its entries between calls, as the simulation's does) that changes the answer it
    gave after the read does not change what the memo compares the next answer with."""
    raw = [entry(1), entry(2)]
    first = read_fresh(raw)
    raw[0]["LifecycleState"] = "Terminating"  # the same map, changed in place
    again = group_instances(raw, first)
    assert [(i.instance_id, i.lifecycle_state) for i in again.instances] == [
        (f"i-{1:017x}", "Terminating"),
        (f"i-{2:017x}", "InService"),
    ]
    raw.append(entry(3))  # the same list, grown
    assert len(group_instances(raw, again).instances) == 3


@pytest.mark.parametrize(("kept", "now"), [(1, True), (1.0, 1), ("1", "1")])
def test_values_other_than_text_are_read_again_every_time(kept: Any, now: Any) -> None:
    """``True == 1 == 1.0`` in Python, but their text differs: a list holding any value that is not a ``str`` where
    the Instance's fields are read is never answered from the memo (the API answers only text there)."""
    first = read_fresh([entry(1, health=kept)])
    assert (first.raw is None) is (type(kept) is not str)
    again = group_instances([entry(1, health=now)], first)
    assert again.instances == (Instance(f"i-{1:017x}", "us-east-1a", "InService", str(now)),)
