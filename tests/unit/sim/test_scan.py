"""The checker's scan over the view's ``NodeIndex`` (``sim.invariants.Checker.scan``) judges as the scan over every
node did: both run on the same random states (nodes joining, leaving, cordoned by us or not, Ready or not;
instances running or not; commands, refresh runs, the lock, outages) and must raise the same violations and keep
the same memory of cordons, nodes, runs and shortfalls."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from sim.invariants import ACTIVE_RUN, Bounds, Checker, Violation, view_epoch
from sim.kernel import EPOCH
from sim.world_view import GroupState, NodeIndex, NodeState

AZS = ("a", "b", "c")


class RandomView:
    """A ``WorldView`` whose state the test changes; the index is kept while the nodes do not change."""

    def __init__(self) -> None:
        self.nodes: list[NodeState] = []
        self.running: dict[str, tuple[str | None, str]] = {}
        self.commands: list[dict[str, Any]] = []
        self.runs: list[dict[str, Any]] = []
        self.lock: dict[str, Any] | None = None
        self.groups = [GroupState(f"nodes-{az}", False, az, "nodes", 4, 4, 4) for az in AZS]
        self.groups.append(GroupState("master-a", True, "a", "master-a", 1, 1, 1))
        self.outages: frozenset[str] = frozenset()
        self._index: NodeIndex | None = None

    def set_nodes(self, nodes: list[NodeState]) -> None:
        self.nodes, self._index = nodes, None

    def node_states(self) -> list[NodeState]:
        return self.nodes

    def node_index(self) -> NodeIndex:
        if self._index is None:
            self._index = NodeIndex.of(self.nodes)
        return self._index

    def running_instances(self) -> dict[str, tuple[str | None, str]]:
        return self.running

    def running_per_group(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for group, _az in self.running.values():
            if group is not None:
                out[group] = out.get(group, 0) + 1
        return out

    def group_states(self) -> list[GroupState]:
        return self.groups

    def table_prefix(self, prefix: str) -> list[dict[str, Any]]:
        return self.commands if prefix == "CMD#" else self.runs

    def open_command_instances(self) -> set[str]:
        return {str(i.get("instance_id")) for i in self.commands if i.get("status") in ("queued", "running")}

    def table_item(self, sk: str) -> dict[str, Any] | None:
        return self.lock

    def table_items(self) -> list[dict[str, Any]]:
        return [*self.commands, *self.runs, *([self.lock] if self.lock else [])]

    def movable_pods(self, node: str) -> int:
        return 0

    def outage_azs(self) -> frozenset[str]:
        return self.outages

    def baseline(self) -> dict[str, tuple[int, int]]:
        return {g.name: (g.desired, g.max_size) for g in self.groups}

    def restore_excused(self) -> dict[str, set[int]]:
        return {}

    def kops_taken(self) -> int:
        return 0


class EveryNode(Checker):
    """The scan as it was before the ``NodeIndex`` (every node looked at in every scan): the reference."""

    def scan(self) -> None:
        self.checks += 1
        view, t, b = self.view, self.t, self.bounds
        nodes = view.node_states()
        if self._operator_cordons:
            for n in nodes:
                if n.name in self._operator_cordons and not n.unschedulable:
                    self.fail("6 others' cordons left alone", f"node {n.name} cordoned by an operator was uncordoned")
        active = {
            str(i.get("instance_id")) for i in view.table_prefix("CMD#") if i.get("status") in ("queued", "running")
        }
        running = view.running_instances()
        cordons = self._cordons
        for n in nodes:
            if n.ours and n.unschedulable and n.instance_id in running and n.instance_id not in active:
                since = cordons.setdefault(n.name, t)
                if t - since > b.cordon:
                    self.fail("8 a cordon of ours is resolved within a bound", f"node {n.name} cordoned since {since}")
            elif cordons:
                cordons.pop(n.name, None)
        ready_now: set[str] | None = None
        for item in view.table_prefix("RUN#"):
            if item.get("status") not in ACTIVE_RUN:
                continue
            run_id = str(item.get("sk", ""))[4:]
            if ready_now is None:
                ready_now = {n.name for n in nodes if not n.master and n.ready}
            instances = {n.name: n.instance_id for n in nodes}
            start = self.ready.started(run_id, frozenset(ready_now), frozenset(), instances, item.get("created_at"))
            lost = {n.name for n in nodes if n.name in start and n.instance_id in self.refreshed}
            lost |= {name for name, instance in self._gone.items() if name in start and instance in self.refreshed}
            lost -= ready_now
            taken, listed = view.kops_taken(), view.node_states  # when the new ones registered
            if short := self.ready.short(run_id, frozenset(ready_now), instances, running, t, len(lost), taken, listed):
                self.fail("1 Ready workers never below the start during a refresh", short)
            updated = str(item.get("updated_at"))
            seen = self._runs.get(run_id)
            if seen is None or seen[0] != updated:
                self._runs[run_id] = (updated, t)
            elif t - seen[1] > b.run_stalled:
                self.fail("8 no run stuck past its deadline", f"run {run_id} unchanged since t={seen[1]:.0f}")
        current = {n.name: n.instance_id for n in nodes}
        for name in sorted(self._known.keys() - current.keys()):
            self._gone[name] = self._known.pop(name)
        self._known.update(current)
        lock = view.table_item("LOCK")
        holder = str(lock.get("holder")) if lock and float(lock.get("lease_expires_at", 0)) > view_epoch(t) else None
        if holder is None:
            self._lock = None
        elif self._lock is None or self._lock[0] != holder:
            self._lock = (holder, t)
        elif t - self._lock[1] > b.lock_held:
            self.fail("8 no lock held past its bound", f"{holder} holds the lock since t={self._lock[1]:.0f}")
        self._shortfalls(view.group_states(), view.running_per_group(), view.outage_azs())


def memory(checker: Checker) -> tuple[Any, ...]:
    return (
        checker._cordons,
        checker._known,
        checker._gone,
        checker._runs,
        checker.ready,
        checker._short,
        checker._lock,
        checker.checks,
    )


def change(rng: random.Random, view: RandomView, checkers: list[Checker], joined: list[int]) -> None:
    """One random change of the world (the nodes only sometimes: the index is then the same object)."""
    if rng.random() < 0.6:
        nodes = list(view.nodes)
        for _ in range(rng.randint(1, 4)):
            roll = rng.random()
            if roll < 0.25 or not nodes:
                joined[0] += 1
                az = rng.choice(AZS)
                instance = f"i-{joined[0]:08x}"
                view.running[instance] = (f"nodes-{az}", az)
                nodes.append(NodeState(f"n{joined[0] % 60}", instance, rng.random() < 0.1, True, False, False, False))
                nodes = list({n.name: n for n in nodes}.values())  # a name joins again: the newer node
            elif roll < 0.4:
                nodes.pop(rng.randrange(len(nodes)))
            else:
                k = rng.randrange(len(nodes))
                n = nodes[k]
                nodes[k] = replace(
                    n,
                    ready=rng.random() < 0.8,
                    unschedulable=rng.random() < 0.5,
                    ours=rng.random() < 0.6,
                    operator=n.operator,
                )
        view.set_nodes(nodes)
    instances = sorted({n.instance_id for n in view.nodes} | set(view.running))
    if instances and rng.random() < 0.3:
        gone = rng.choice(instances)
        view.running.pop(gone, None)
    if instances and rng.random() < 0.3:
        view.commands = [
            {
                "sk": f"CMD#{k}",
                "instance_id": rng.choice(instances),
                "status": rng.choice(["queued", "running", "done"]),
            }
            for k in range(rng.randint(0, 4))
        ]
    if rng.random() < 0.2:
        view.runs = [
            {
                "sk": f"RUN#r{k}",
                "status": rng.choice([*ACTIVE_RUN, "succeeded"]),
                "updated_at": rng.randint(0, 3),
                "created_at": (EPOCH + timedelta(seconds=rng.uniform(0, 300 * 120))).isoformat(),  # the start's going
            }
            for k in range(rng.randint(0, 2))
        ]
    if instances and rng.random() < 0.2:
        refreshed = rng.choice(instances)
        for checker in checkers:
            checker.refresher_terminated(refreshed)
    if rng.random() < 0.1:
        view.outages = frozenset(rng.sample(AZS, rng.randint(0, 2)))
    if rng.random() < 0.1:
        view.lock = {"sk": "LOCK", "holder": rng.choice(["refresher:1", "replenisher:2"]), "lease_expires_at": 1e12}


@pytest.mark.parametrize("seed", range(8))
def test_the_scan_over_the_index_judges_as_the_scan_over_every_node(seed: int) -> None:
    rng = random.Random(seed)
    bounds = Bounds(cordon=900.0, run_stalled=1800.0, lock_held=2400.0, shortfall=1200.0)
    joined = [0]
    violations = 0
    for _life in range(6):  # after a violation both start again on a new world
        view = RandomView()
        new, old = Checker(view, seed, bounds), EveryNode(view, seed, bounds)
        for step in range(300):
            change(rng, view, [new, old], joined)
            if rng.random() < 0.05 and view.nodes:
                node = rng.choice(view.nodes).name
                cordoned = rng.random() < 0.7
                new.operator_cordon(node, cordoned)
                old.operator_cordon(node, cordoned)
            new.t = old.t = step * 120.0
            outcomes = []
            for checker in (new, old):
                try:
                    checker.scan()
                    outcomes.append(None)
                except Violation as found:
                    outcomes.append(str(found))
            assert outcomes[0] == outcomes[1]
            if outcomes[0] is not None:
                violations += 1
                break
            assert memory(new) == memory(old)
    assert violations >= 2  # the states reached the checks that fail, not only the quiet ones
