"""The agent's node reads against the local world's kube-apiserver: lists in pages (``limit``/``continue``), and a
command's node found through the instance -> name index or a paged scan, never one list of every node."""

from __future__ import annotations

from typing import Any

from kubernetes import client as k8s

from agent.kube.client import KubeAdapter
from localworld.world import LocalWorld


def make_nodes(world: LocalWorld, count: int) -> dict[str, str]:
    """``count`` nodes with AWS providerIDs and one without; instance id -> node name."""
    core = k8s.CoreV1Api(world.api)
    made = {}
    for n in range(count):
        instance_id = f"i-0{n:016x}"
        name = f"ip-10-9-0-{n}.ec2.internal"
        body: dict[str, Any] = {
            "metadata": {"name": name, "labels": {"kops.k8s.io/instancegroup": "nodes"}},
            "spec": {"providerID": f"aws:///us-east-1a/{instance_id}"},
        }
        core.create_node(body)
        made[instance_id] = name
    core.create_node({"metadata": {"name": "not-aws"}, "spec": {"providerID": "kind://docker/x"}})
    return made


class CountingKube(KubeAdapter):
    """The adapter, counting the node list requests it sends (pages) and the GETs of a node."""

    def __init__(self, api: k8s.ApiClient, page_size: int) -> None:
        super().__init__(api, node_page_size=page_size)
        self.pages = 0
        self.gets = 0

    def _send(self, what: str, call: Any, *args: Any, **kwargs: Any) -> Any:
        if what == "list nodes":
            self.pages += 1
            assert kwargs.get("limit") == self.node_page_size
        if what.startswith("get node "):
            self.gets += 1
        return super()._send(what, call, *args, **kwargs)


def test_nodes_are_listed_in_pages_of_the_page_size_and_all_arrive(world: LocalWorld) -> None:
    made = make_nodes(world, 7)
    kube = CountingKube(world.agent_api, page_size=3)
    pages = list(kube.list_node_pages())
    assert [len(p) for p, _ in pages] == [3, 3, 2]  # 8 nodes (7 AWS + 1 not) in pages of 3
    assert kube.pages == 3
    assert len({rv for _, rv in pages}) == 1 and pages[0][1]  # one snapshot, one resourceVersion
    listed = {n.name for p, _ in pages for n in p}
    assert listed == {*made.values(), "not-aws"}
    assert {iid: kube.node_index.name(iid) for iid in made} == made  # the index learned every AWS node


def test_a_commands_node_is_found_by_one_get_when_the_index_knows_it(world: LocalWorld) -> None:
    made = make_nodes(world, 5)
    kube = CountingKube(world.agent_api, page_size=2)
    wanted = sorted(made)[-1]

    node = kube.node_for_instance(wanted)  # the index is empty: a paged scan, stopping at the match
    assert node is not None and node.name == made[wanted]
    assert kube.pages >= 1 and kube.gets == 0

    kube.pages = 0
    again = kube.node_for_instance(wanted)  # known now: one GET, no list
    assert again is not None and again.name == made[wanted]
    assert (kube.pages, kube.gets) == (0, 1)

    assert kube.node_for_instance("i-0fffffffffffffff0") is None  # unknown: every page read, none found
    assert kube.pages == 3


def test_the_watch_feeds_the_index(world: LocalWorld) -> None:
    made = make_nodes(world, 2)
    kube = CountingKube(world.agent_api, page_size=500)
    _, rv = kube.list_nodes_versioned()
    core = k8s.CoreV1Api(world.api)
    core.create_node({"metadata": {"name": "late"}, "spec": {"providerID": "aws:///us-east-1b/i-0eeeeeeeeeeeeeee1"}})
    core.delete_node(made[sorted(made)[0]])
    seen = []
    with kube.watch_nodes(rv, 2) as watch:
        for event in watch:
            seen.append(event.type)
            if len(seen) == 2:
                break
    assert kube.node_index.name("i-0eeeeeeeeeeeeeee1") == "late"
    assert kube.node_index.name(sorted(made)[0]) is None
