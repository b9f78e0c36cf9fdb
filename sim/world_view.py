"""What the invariant checker (``sim.invariants``) reads of a simulated world: the states of groups and nodes, what
it derives from the nodes (``NodeIndex``), and the ``WorldView`` protocol ``sim.view.View`` implements.

A view may answer the same objects again while nothing they describe changed (``sim.view.View`` caches them against
version counters of the simulated Kubernetes and EC2 state); callers only read them, and read an answer before the
world moves on (``running_instances`` and ``running_per_group`` are then brought up in place).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class GroupState:
    """An Auto Scaling group as the checker sees it."""

    name: str
    master: bool
    az: str
    pool: str
    desired: int
    min_size: int
    max_size: int


@dataclass(frozen=True)
class NodeState:
    """A node: its instance, role, Ready, cordon (``ours``: our annotation is on it; ``operator``: someone else
    cordoned it), and when it registered."""

    name: str
    instance_id: str
    master: bool
    ready: bool
    unschedulable: bool
    ours: bool
    operator: bool
    created: str = ""  # its ``creationTimestamp`` (when its kubelet registered it)


@dataclass(frozen=True)
class NodeIndex:
    """What the checker's scan derives from one answer of ``node_states``, made once per change of the nodes.

    Attributes:
        instance_of: node name -> its instance id, in the nodes' order.
        ours_cordoned: the nodes with our cordon annotation that are unschedulable, in the nodes' order.
        ready_workers: the names of the Ready nodes that are not masters.
    """

    instance_of: dict[str, str]
    ours_cordoned: tuple[NodeState, ...]
    ready_workers: frozenset[str]

    @classmethod
    def of(cls, nodes: Sequence[NodeState]) -> NodeIndex:
        return cls(
            {n.name: n.instance_id for n in nodes},
            tuple(n for n in nodes if n.ours and n.unschedulable),
            frozenset(n.name for n in nodes if not n.master and n.ready),
        )


class WorldView(Protocol):
    """What the checker reads of the simulated world (``sim.view.View``)."""

    def group_states(self) -> list[GroupState]: ...

    def running_instances(self) -> dict[str, tuple[str | None, str]]:
        """instance id -> (its group or None when detached, its AZ), for pending and running instances."""
        ...

    def running_per_group(self) -> dict[str, int]:
        """group -> how many of ``running_instances`` it holds (groups holding none absent)."""
        ...

    def node_states(self) -> list[NodeState]: ...

    def node_index(self) -> NodeIndex:
        """``NodeIndex.of(node_states())``; the same object again while the nodes did not change."""
        ...

    def movable_pods(self, node: str) -> int:
        """Pods on ``node`` a drain must move (workload pods Running and not being deleted)."""
        ...

    def table_items(self) -> list[dict[str, Any]]: ...

    def table_prefix(self, prefix: str) -> list[dict[str, Any]]:
        """The cluster partition's items whose sort key starts with ``prefix``, in sort-key order."""
        ...

    def table_item(self, sk: str) -> dict[str, Any] | None:
        """The cluster partition's item ``sk`` (None when absent)."""
        ...

    def open_command_instances(self) -> Collection[str]:
        """The ``instance_id`` (as ``str``) of every ``CMD#`` item whose status is ``queued`` or ``running``: what a
        set made of ``table_prefix("CMD#")`` holds (callers only test membership)."""
        ...

    def outage_azs(self) -> frozenset[str]: ...

    def baseline(self) -> dict[str, tuple[int, int]]:
        """group -> (desired, MaxSize) they must end at (the start, or what a kOps spec edit last set them to)."""
        ...

    def restore_excused(self) -> dict[str, set[int]]:
        """group -> MaxSizes the end check also accepts with the baseline's desired capacity (an original a raise of
        ours restored over a spec edit it could not tell from its own raise: ``sim.actors._kops_spec``; a MaxSize a
        failed run left raised while a fault kept the refresher from running its restore: ``sim.left_raised``). An
        original under the group's desired capacity is accepted as that capacity: a MaxSize is never below it, so the
        give-back leaves it there (seed 330090 of the ``resize`` profile)."""
        ...

    def kops_taken(self) -> int:
        """How many desired capacity units kOps' writes have clamped away so far (each an instance of Auto Scaling's
        choosing scaled in: ``sim.actors._kops_write``)."""
        ...
