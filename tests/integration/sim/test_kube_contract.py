"""Contract: the in-memory cluster (``sim.kube``) answers the Eviction API as the local world's kube-apiserver does
(v1.20, policy/v1beta1, with the cluster simulator's disruption controller keeping budget status), through the
same classification the agent uses (``agent.kube.client.KubeAdapter`` on the apiserver, ``SimKube`` in memory).

One scripted sequence on each, on one node: 3 Ready pods of ``web`` (grace 30 s) under a budget of
``minAvailable: 2``, one pod of ``held`` under a budget allowing no disruption, one pod of ``free`` under none. An
eviction of ``web`` (201), a second at once (429 naming the budget: the apiserver decrements
``disruptionsAllowed`` itself, before the disruption controller sees the replacement), an unknown pod (404), the
``held`` pod under a stale uid precondition (429: the budget is checked before the delete's precondition), the
``free`` pod under a stale uid (409), then a second budget over ``web`` (500 "more than one
PodDisruptionBudget"). Each answer is one the timing of the controllers cannot change. Compared: the status, the
HTTP code, the budget named, whether the agent reads it as a budget's refusal, whether it retries.
"""

from __future__ import annotations

from typing import Any

from agent.kube.client import KubeAdapter
from agent.kube.eviction import EvictionResponse
from localworld.cluster import ClusterInfo
from localworld.rest import q
from localworld.simulator.objects import is_live, pod_ready
from localworld.workloads import create_pdb, deploy_pods_on_node, get_pdb
from localworld.world import LocalWorld
from sim.kernel import Kernel
from sim.kube import SimKube
from sim.kube_objects import Budget

NS = "contract"
APP = "web"


def shape(response: EvictionResponse) -> tuple[Any, ...]:
    return (response.status.value, response.http_status, response.pdb_name, response.pdb_blocked, response.retryable)


class Api:
    """The calls of the sequence, on one side."""

    def pods(self, app: str = APP) -> list[tuple[str, str]]:
        raise NotImplementedError

    def evict(self, name: str, uid: str | None = None) -> EvictionResponse:
        raise NotImplementedError

    def second_budget(self) -> None:
        raise NotImplementedError


def sequence(api: Api) -> list[tuple[Any, ...]]:
    (first, first_uid), (second, _), (third, _) = api.pods()[:3]
    (held, _), (free, _) = api.pods("held")[0], api.pods("free")[0]
    stale = "00000000-0000-0000-0000-000000000000"
    answers = [shape(api.evict(first, first_uid)), shape(api.evict(second)), shape(api.evict("nope"))]
    answers += [shape(api.evict(held, stale)), shape(api.evict(free, stale))]
    api.second_budget()
    answers.append(shape(api.evict(third)))
    return answers


class World(Api):
    def __init__(self, world: LocalWorld, node: str) -> None:
        self.world = world
        self.kube = KubeAdapter(world.agent_api)
        deploy_pods_on_node(world.rest, node, 3, grace=30, namespace=NS, name=APP)
        deploy_pods_on_node(world.rest, node, 1, grace=30, namespace=NS, name="held")
        deploy_pods_on_node(world.rest, node, 1, grace=30, namespace=NS, name="free")
        create_pdb(world.rest, NS, "web-pdb", {"app": APP}, min_available=2)
        create_pdb(world.rest, NS, "held-blocker", {"app": "held"}, max_unavailable=0)
        self.observed("web-pdb", 3)
        self.observed("held-blocker", 1)

    def observed(self, name: str, healthy: int) -> None:
        def current() -> bool:
            status = get_pdb(self.world.rest, NS, name).get("status", {})
            return bool(status.get("observedGeneration") == 1 and status.get("currentHealthy") == healthy)

        self.world.simulator.wait_for(current, 10, f"PDB {name} status current")

    def pods(self, app: str = APP) -> list[tuple[str, str]]:
        items = self.world.rest.get(f"/api/v1/namespaces/{q(NS)}/pods", labelSelector=f"app={app}")["items"]
        live = sorted((p for p in items if is_live(p) and pod_ready(p)), key=lambda p: p["metadata"]["name"])
        return [(p["metadata"]["name"], p["metadata"]["uid"]) for p in live]

    def evict(self, name: str, uid: str | None = None) -> EvictionResponse:
        return self.kube.evict_pod(NS, name, uid)

    def second_budget(self) -> None:
        create_pdb(self.world.rest, NS, "web-pdb-2", {"app": APP}, max_unavailable=1)
        self.world.simulator.wait_for(
            lambda: get_pdb(self.world.rest, NS, "web-pdb-2").get("status", {}).get("observedGeneration") == 1,
            10,
            "second PDB observed",
        )


class Memory(Api):
    def __init__(self) -> None:
        self.kernel = Kernel(seed=1)
        self.kube = SimKube(self.kernel)
        self.kube.add_node("n0", "i-0", "us-east-1a")
        self.kube.add_deployment(NS, APP, 3, grace=30)
        self.kube.add_deployment(NS, "held", 1, grace=30)
        self.kube.add_deployment(NS, "free", 1, grace=30)
        self.kube.add_budget(Budget(NS, "web-pdb", {"app": APP}, min_available=2))
        self.kube.add_budget(Budget(NS, "held-blocker", {"app": "held"}, max_unavailable=0))
        self.kernel.run(30)

    def pods(self, app: str = APP) -> list[tuple[str, str]]:
        views, _ = self.kube.list_pods_on_node("n0")
        live = (p for p in views if p.ready and p.deletion_timestamp is None and p.labels.get("app") == app)
        return sorted((p.name, p.uid) for p in live)

    def evict(self, name: str, uid: str | None = None) -> EvictionResponse:
        return self.kube.evict_pod(NS, name, uid)

    def second_budget(self) -> None:
        self.kube.add_budget(Budget(NS, "web-pdb-2", {"app": APP}, max_unavailable=1))


def test_evictions_answer_the_same_in_memory_and_on_the_apiserver(world: LocalWorld, cluster: ClusterInfo) -> None:
    nodes = world.rest.get("/api/v1/nodes")["items"]
    worker = sorted(
        n["metadata"]["name"] for n in nodes if "node-role.kubernetes.io/node" in n["metadata"].get("labels", {})
    )[0]
    real = sequence(World(world, worker))
    memory = sequence(Memory())
    assert memory == real
    assert [a[0] for a in real] == ["evicted", "blocked", "gone", "blocked", "gone", "multiple_pdbs"]
