"""``read_groups``: an instance's facts are made once for what they hold and shared between passes (frozen), made
anew when anything they hold changed; the memo is bounded. A group's instances answered as the pass before are the
facts made then, when equal means the same text."""

from __future__ import annotations

import operator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.kops import managed_group
from lambdas.refresher import gather
from lambdas.refresher.gather import GatherMemo, read_groups
from lambdas.refresher.world import GroupFacts, InstanceFacts

CLUSTER = "demo"
T0 = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)


def instance(k: int, state: str = "InService", version: str | None = "3") -> dict[str, Any]:
    out: dict[str, Any] = {"InstanceId": f"i-{k:017x}", "AvailabilityZone": "us-east-1a", "LifecycleState": state}
    if version is not None:
        out["LaunchTemplate"] = {"LaunchTemplateId": "lt-1", "Version": version}
    return out


class Aws:
    """The two ports ``read_groups`` reads: one worker group of the instances given."""

    def __init__(self, instances: list[dict[str, Any]], times: dict[str, datetime] | None = None) -> None:
        self.instances, self.times = instances, times or {}
        self.desired: int | None = None

    def cluster_groups(self, cluster: str) -> list[dict[str, Any]]:
        return [
            {
                "AutoScalingGroupName": "nodes",
                "MinSize": 1,
                "MaxSize": 9,
                "DesiredCapacity": len(self.instances) if self.desired is None else self.desired,
                "Tags": [  # as AWS answers them: PropagateAtLaunch a bool, never read
                    {"Key": "KubernetesCluster", "Value": cluster, "PropagateAtLaunch": True},
                    {"Key": "k8s.io/role/node", "Value": "1", "PropagateAtLaunch": True},
                ],
                "Instances": self.instances,
            }
        ]

    def template_versions(self, ids: list[str]) -> dict[str, tuple[str, str]]:
        return {}

    def launch_times(self, ids: list[str]) -> dict[str, datetime]:
        return {i: t for i, t in self.times.items() if i in ids}


@pytest.fixture
def memo() -> GatherMemo:
    """A fresh execution environment's memo (``handler.Deps.gather_memo``): each test starts cold."""
    return GatherMemo()


def facts(memo: GatherMemo, aws: Aws, launch: bool = False) -> tuple[InstanceFacts, ...]:
    return read_groups(aws, aws, CLUSTER, memo, with_launch_facts=launch)["nodes"].instances  # type: ignore[arg-type]


def test_facts_are_shared_while_the_instance_is_as_it_was_and_made_anew_when_it_changed(memo: GatherMemo) -> None:
    one = facts(memo, Aws([instance(k) for k in range(5)]))
    two = facts(memo, Aws([instance(k) for k in range(4)] + [instance(4, state="Terminating")]))
    assert all(a is b for a, b in zip(one[:4], two[:4], strict=True))
    assert two[4] is not one[4]
    assert two[4] == InstanceFacts("i-00000000000000004", "us-east-1a", "Terminating", "3")
    assert one[0] == InstanceFacts("i-00000000000000000", "us-east-1a", "InService", "3")
    assert facts(memo, Aws([instance(0, version=None)]))[0].launch_template_version is None


def test_a_launch_time_in_another_zone_is_not_the_same_facts(memo: GatherMemo) -> None:
    iid = instance(0)["InstanceId"]
    utc = facts(memo, Aws([instance(0)], {iid: T0}), launch=True)[0]
    other = T0.astimezone(timezone(timedelta(hours=1)))  # the same instant
    shifted = facts(memo, Aws([instance(0)], {iid: other}), launch=True)[0]
    assert utc.launch_time == shifted.launch_time and utc is not shifted
    assert shifted.launch_time is not None and shifted.launch_time.utcoffset() == timedelta(hours=1)


def test_the_memo_is_bounded(monkeypatch: pytest.MonkeyPatch, memo: GatherMemo) -> None:
    monkeypatch.setattr(gather, "MEMO_INSTANCES", 10)
    for start in range(0, 50, 7):
        facts(memo, Aws([instance(k) for k in range(start, start + 7)]))
        assert 0 < len(memo.facts) <= 10


def test_a_group_answered_as_before_is_the_facts_made_before(memo: GatherMemo) -> None:
    first = facts(memo, Aws([instance(k) for k in range(5)]))
    assert facts(memo, Aws([instance(k) for k in range(5)])) is first  # equal entries, new lists and maps
    changed = facts(memo, Aws([instance(k) for k in range(4)] + [instance(4, state="Terminating")]))
    assert changed is not first and changed[4].lifecycle_state == "Terminating" and changed[:4] == first[:4]
    assert facts(memo, Aws([instance(k) for k in range(4)] + [instance(4, state="Terminating")])) is changed
    assert facts(memo, Aws([instance(k) for k in range(4)])) == first[:4]  # one gone


def test_equal_but_not_the_same_text_is_read_anew(memo: GatherMemo) -> None:
    # True == 1, and {"Version": True} == {"Version": 1}: the versions the facts hold differ ("True", "1")
    one = facts(memo, Aws([instance(0, version=True)]))  # type: ignore[arg-type]
    two = facts(memo, Aws([instance(0, version=1)]))  # type: ignore[arg-type]
    assert (one[0].launch_template_version, two[0].launch_template_version) == ("True", "1")


def test_the_same_list_answered_again_is_read_anew(memo: GatherMemo) -> None:
    listed = [instance(k) for k in range(3)]
    aws = Aws(listed)
    facts(memo, aws)
    listed[1]["LifecycleState"] = "Terminating"  # a port that changed its answer in place
    assert facts(memo, aws)[1].lifecycle_state == "Terminating"


def test_launch_facts_are_never_answered_from_a_read_without_them(memo: GatherMemo) -> None:
    iid = instance(0)["InstanceId"]
    facts(memo, Aws([instance(0)]))
    assert facts(memo, Aws([instance(0)], {iid: T0}), launch=True)[0].launch_time == T0


_FIELD = st.one_of(st.none(), st.text(max_size=2), st.integers(0, 2), st.booleans())
_TEMPLATE = st.one_of(
    _FIELD, st.dictionaries(st.sampled_from(["LaunchTemplateId", "Version"]), _FIELD), st.lists(_FIELD, max_size=1)
)
_INSTANCE = st.one_of(
    st.dictionaries(
        st.sampled_from(["InstanceId", "AvailabilityZone", "LifecycleState", "LaunchTemplate"]),
        st.one_of(_FIELD, _TEMPLATE),
    ),
    st.lists(_FIELD, max_size=1),
    _FIELD,
)


@given(_INSTANCE)
@settings(max_examples=500, deadline=None)
def test_text_is_told_as_by_each_field_in_turn(value: Any) -> None:
    # ``_as_text`` looks at each field in line: the same answer as looking at them in a loop
    fields = ("InstanceId", "AvailabilityZone", "LifecycleState")
    if type(value) is not dict or not all(type(value.get(f)) is str for f in fields):
        plain = False
    else:
        template = value.get("LaunchTemplate")
        plain = not template or (type(template) is dict and type(template.get("Version", "")) is str)
    assert gather._as_text(value) is plain


_STATES = st.sampled_from(["InService", "Pending", "Terminating"])
_ENTRY = st.builds(instance, st.integers(0, 12), _STATES, st.sampled_from(["3", "4", None, True, 1]))


@given(st.lists(st.lists(_ENTRY, max_size=8), min_size=1, max_size=6))
@settings(max_examples=300, deadline=None)
def test_a_changed_group_s_facts_are_those_of_its_entries(reads: list[list[dict[str, Any]]]) -> None:
    # entries equal to the last list's entries they line up with keep their facts (``_aligned``), the
    # others are made: always the facts a first read makes, ``True`` and ``1`` apart
    memo = GatherMemo()
    for listed in reads:
        got = facts(memo, Aws([dict(i) for i in listed]))
        made = tuple(gather._facts(i, {}, {}) for i in listed)
        assert got == made
        assert [type(f.launch_template_version) for f in got] == [type(f.launch_template_version) for f in made]
        assert [f.launch_template_version for f in got] == [f.launch_template_version for f in made]


def test_a_changed_group_keeps_the_facts_of_its_unchanged_entries(
    monkeypatch: pytest.MonkeyPatch, memo: GatherMemo
) -> None:
    made: list[str] = []
    make = gather._facts

    def counted(entry: dict[str, Any], times: dict[str, datetime], kept: dict[Any, InstanceFacts]) -> InstanceFacts:
        made.append(entry["InstanceId"])
        return make(entry, times, kept)

    monkeypatch.setattr(gather, "_facts", counted)
    facts(memo, Aws([instance(k) for k in range(6)]))
    made.clear()
    # one gone in the middle, one changed, a spare launched at the end: only those two looked up
    again = facts(
        memo, Aws([instance(0), instance(1), instance(3, "Terminating"), instance(4), instance(5), instance(9)])
    )
    assert made == [instance(3)["InstanceId"], instance(9)["InstanceId"]] and len(again) == 6
    made.clear()
    facts(
        memo,
        Aws([instance(7), instance(0), instance(1), instance(3, "Terminating"), instance(4), instance(5), instance(9)]),
    )
    assert made == [instance(7)["InstanceId"]]  # one inserted at the start


def test_a_changed_group_keeps_the_facts_of_its_unchanged_ends(memo: GatherMemo) -> None:
    first = facts(memo, Aws([instance(k) for k in range(6)]))
    middle = facts(memo, Aws([*(instance(k) for k in range(3)), instance(3, "Terminating"), instance(4), instance(5)]))
    assert all(a is b for a, b in zip(first[:3] + first[4:], middle[:3] + middle[4:], strict=True))
    grown = facts(memo, Aws([*(instance(k) for k in range(1, 6)), instance(9)]))  # one gone at the start, one new
    assert grown[-1].instance_id == instance(9)["InstanceId"] and grown[:4] == first[1:5]


def group(memo: GatherMemo, aws: Aws) -> GroupFacts:
    return read_groups(aws, aws, CLUSTER, memo)["nodes"]  # type: ignore[arg-type]


def test_a_group_read_as_before_is_the_same_group_facts_with_what_it_worked_out(memo: GatherMemo) -> None:
    one = group(memo, Aws([instance(k) for k in range(4)]))
    assert one.live and one.instance(instance(2)["InstanceId"]) is not None
    assert group(memo, Aws([instance(k) for k in range(4)])) is one
    bigger = Aws([instance(k) for k in range(4)])
    bigger.desired = 5
    three = group(memo, bigger)
    assert three is not one and three.desired == 5 and three.instances is one.instances


def test_two_environments_memos_do_not_interfere() -> None:
    # two execution environments (two ``Deps`` in one process: the simulation's, tests') reading different groups in
    # turn: each read is answered from its own environment's last read (the same facts), never from the other's; a
    # cold start (a new memo) makes its facts anew, equal to the warm ones
    one, two = GatherMemo(), GatherMemo()

    def small() -> Aws:
        return Aws([instance(k) for k in range(3)])

    def big() -> Aws:
        return Aws([instance(k, state="Pending") for k in range(3)] + [instance(9)])

    first_one, first_two = group(one, small()), group(two, big())
    assert [i.lifecycle_state for i in first_one.instances] == ["InService"] * 3
    assert [i.lifecycle_state for i in first_two.instances] == ["Pending"] * 3 + ["InService"]
    for _ in range(3):
        assert group(one, small()) is first_one
        assert group(two, big()) is first_two
    cold = group(GatherMemo(), small())
    assert cold == first_one and cold is not first_one
    assert not any(map(operator.is_, cold.instances, first_one.instances))


def test_a_group_answered_as_before_is_read_no_further(monkeypatch: pytest.MonkeyPatch, memo: GatherMemo) -> None:
    # an answer equal to the last (a new dict and list: sizes, tags, instances) is the facts made of the last, its
    # tags not read again; a tag changed, or a value that is not text in the last answer, is read anew
    read: list[str] = []

    def counted(asg: dict[str, Any], cluster: str) -> Any:
        read.append(asg["AutoScalingGroupName"])
        return managed_group(asg, cluster)

    monkeypatch.setattr(gather, "managed_group", counted)
    aws = Aws([instance(k) for k in range(3)])
    one = group(memo, aws)
    aws.instances = [instance(k) for k in range(3)]
    assert group(memo, aws) is one and read == ["nodes"]
    aws.instances = [instance(k) for k in range(2)] + [instance(2, state="Terminating")]
    moved = group(memo, aws)  # its instances changed, its tags not: the same group, new facts
    assert read == ["nodes"] and moved.instances[2].lifecycle_state == "Terminating" and moved.instance_group is None
    aws.instances = [instance(k) for k in range(3)]
    demo = aws.cluster_groups(CLUSTER)
    aws.cluster_groups = lambda cluster: [{**demo[0], "Instances": list(demo[0]["Instances"])}]  # type: ignore[method-assign]
    assert read_groups(aws, aws, "another", memo) == {} and read == ["nodes", "nodes"]  # type: ignore[arg-type]
    one = group(memo, aws)  # the same answer for its own cluster: read again, the last read kept nothing
    read.clear()
    retagged = Aws([instance(k) for k in range(3)])
    retagged.cluster_groups = lambda cluster: [  # type: ignore[method-assign]
        {**Aws.cluster_groups(retagged, cluster)[0], "Tags": [*Aws.cluster_groups(retagged, cluster)[0]["Tags"], ig]}
    ]
    ig = {"Key": "kops.k8s.io/instancegroup", "Value": "nodes-a"}
    two = group(memo, retagged)
    assert read == ["nodes"] and two.instance_group == "nodes-a" and two.instances is one.instances
    ig = {"Key": "kops.k8s.io/instancegroup", "Value": True}  # type: ignore[dict-item]
    group(memo, retagged)
    retagged.instances = [instance(k) for k in range(3)]
    group(memo, retagged)  # equal, but the last answer held a value that is not text: read anew
    assert read == ["nodes", "nodes", "nodes"]
