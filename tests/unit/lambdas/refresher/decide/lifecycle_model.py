"""A small model of one worker group (and optionally one master group) as Auto Scaling and the agent show them, on a
clock the test advances, and a run over its instances: the shared setup of ``test_lifecycle`` and the hand-over tests.
Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from core.capacity import Bounds, clamp
from core.kops import Role
from core.model import NodeRecord
from core.runs import GroupSurge, Run, RunOptions, RunStep, Selection
from core.settings import RefresherSettings
from lambdas.refresher.plan import ReleaseLock, SendCommand, SetCapacity, TerminateInstance
from lambdas.refresher.world import GroupFacts, InstanceFacts, World

T0 = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)
SETTINGS = RefresherSettings(cluster_name="c", table_name="t", queue_url="q")  # production deadlines
NODES, MASTERS = "nodes-a.c", "master-a.c"
HOURS = 6


def iid(n: int) -> str:
    return f"i-{n:017x}"


OLD1, OLD2, OLD3, OTHER, M1, M2 = iid(1), iid(2), iid(3), iid(4), iid(0x201), iid(0x202)


@dataclass
class Model:
    """One worker group (and optionally one master group) as Auto Scaling and the agent would show them.

    ``launches``: Auto Scaling can launch (False: a capacity outage in the AZ); ``registers``: a new instance's node
    registers; ``ready``: a registered node becomes Ready."""

    instances: list[str]
    desired: int
    max_size: int
    launches: bool = True
    registers: bool = True
    ready: bool = True
    not_ready: set[str] = field(default_factory=set)
    masters: list[str] = field(default_factory=list)
    nodes: set[str] = field(default_factory=set)
    commands: dict[str, dict[str, object]] = field(default_factory=dict)
    launched: int = 0
    sent: list[SendCommand] = field(default_factory=list)
    released: bool = False
    refused_max_restores: int = 0  # UpdateAutoScalingGroup calls lowering MaxSize refused (throttled) first

    def __post_init__(self) -> None:
        self.nodes |= set(self.instances) | set(self.masters)

    def world(self, donors: frozenset[str] = frozenset()) -> World:
        groups = {
            NODES: GroupFacts(
                NODES, Role.NODE, "nodes-a", 1, self.max_size, self.desired, tuple(map(InstanceFacts, self.instances))
            )
        }
        if self.masters:
            groups[MASTERS] = GroupFacts(
                MASTERS,
                Role.CONTROL_PLANE,
                "master-a",
                1,
                len(self.masters),
                len(self.masters),
                tuple(map(InstanceFacts, self.masters)),
            )
        nodes = {
            i: NodeRecord(instance_id=i, node_name=f"n-{i}", ready=i not in self.not_ready, reported_at=T0)
            for i in self.nodes
        }
        return World(groups=groups, nodes=nodes, membership_confirmed=True, commands=self.commands, donors=donors)

    def apply(self, actions: list[object], bounds: dict[str, Bounds]) -> None:
        """Apply ``actions`` as the executor would (sizes clamped to ``bounds``) and Auto Scaling answers."""
        for a in actions:
            lowers_max = isinstance(a, SetCapacity) and a.max_size is not None and a.max_size < self.max_size
            if lowers_max and self.refused_max_restores:
                self.refused_max_restores -= 1
                return  # refused: the invocation ends on the error, nothing after it applies
            if isinstance(a, SetCapacity):
                bounded = clamp(a.desired, a.max_size, bounds[a.asg_name])
                self.desired = bounded.desired if bounded.desired is not None else self.desired
                self.max_size = bounded.max_size if bounded.max_size is not None else self.max_size
            elif isinstance(a, TerminateInstance):
                if a.instance_id in self.masters:
                    self.masters.remove(a.instance_id)
                    self.masters.append(self.new_id())  # the master group replaces it
                    if not self.ready:
                        self.not_ready.add(self.masters[-1])
                    self.nodes.add(self.masters[-1])
                elif a.instance_id in self.instances:
                    self.instances.remove(a.instance_id)
                    self.desired -= 1 if a.decrement else 0
            elif isinstance(a, SendCommand):
                self.sent.append(a)
                self.commands[a.command.command_id] = {"status": "succeeded", "command": {"deadline": T0.isoformat()}}
            elif isinstance(a, ReleaseLock):
                self.released = True
        assert self.desired <= self.max_size

    def new_id(self) -> str:
        self.launched += 1
        return iid(0x100 + self.launched)

    def autoscale(self) -> None:
        while self.launches and len(self.instances) < self.desired:
            iid = self.new_id()
            self.instances.append(iid)
            if self.registers:
                self.nodes.add(iid)
                if not self.ready:
                    self.not_ready.add(iid)


def new_run(model: Model, olds: list[str], max_surge: int = 1, masters: tuple[str, ...] = ()) -> Run:
    steps = [RunStep(index=i, group=MASTERS, role="control-plane", instance_id=m) for i, m in enumerate(masters)]
    steps += [RunStep(index=len(steps) + i, group=NODES, role="node", instance_id=o) for i, o in enumerate(olds)]
    groups = [
        GroupSurge(name=NODES, role="node", min_size=1, original_desired=model.desired, original_max=model.max_size)
    ]
    if masters:
        groups.insert(0, GroupSurge(name=MASTERS, role="control-plane", min_size=1, original_desired=1, original_max=1))
    return Run(
        run_id="r1",
        cluster="c",
        options=RunOptions(selection=Selection.ALL, max_surge=max_surge),
        created_at=T0,
        updated_at=T0,
        groups=groups,
        steps=steps,
    )
