"""Node health faults (issue 12, item 3; ``storm`` only): a node that stops being Ready for a while, and instances
that join Kubernetes late or never.

- ``node_not_ready``: a node's kubelet stops posting its status (a hung kubelet, a network partition, a full disk):
  the node's ``Ready`` condition turns False for ``duration``, then True again if the node is still there. Its pods
  are not Ready meanwhile (``SimKube.set_node_ready``), so a PodDisruptionBudget over them allows fewer disruptions
  elsewhere, and a pod deleted on it stays ``Terminating`` until the kubelet answers again or the node goes
  (``SimKube._gone``: the kubelet confirms a graceful deletion; Kubernetes documentation, "Pod Lifecycle",
  "Termination of Pods", and "Nodes", "Node status"). The node lifecycle controller's taint-based eviction (after
  ``tolerationSeconds`` 300 of ``node.kubernetes.io/unreachable``) is not modelled: the pods stay bound.
- ``bad_bootstrap``: for ``duration`` the instances of one AZ that enter ``running`` join late (their kubelet
  registers 5-25 minutes later: a slow nodeup, image pulls) or, for ``never``, not at all (a broken launch template or
  user data): the instance runs with no node, which the replenisher's cleanup terminates after
  ``MAX_PROVISION_SECONDS`` (``lambdas.replenisher.decide.cleanup``) and a refresh's spare waits on until its
  ``nodes_ready`` deadline.

The checker is told which nodes the fault made NotReady (``Unwell``): they are not the product's doing, so invariant
1 counts them as Ready (but a new node known NotReady when the refresher terminated a node of the run's start in its
group, standing for none of its terminations: ``sim.ready_count``), and invariant 2 does not blame a master
termination on a master that went NotReady within ``MEMBERSHIP_LAG_SECONDS`` (the agent reports a node's change at
its next membership step, so no Lambda could know), or after the agent's last ``MEMBERSHIP`` mark while the
refresher still trusts that mark (``Unwell.unknown``: the agent's Kubernetes reads refused, nothing reported since;
bounded by ``MEMBERSHIP_MAX_AGE_SECONDS``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent.drain.policy import is_control_plane
from sim.kernel import seconds_of
from sim.kube_objects import is_ready
from sim.schedules import Fault

if TYPE_CHECKING:
    from sim.world import World

# the agent's membership step (``MEMBERSHIP_RESYNC_SECONDS``, 60 s) reports a node's Ready change; a pass reading
# membership after it sees it. Twice that: a master NotReady for longer was known to the Lambda that terminated another
MEMBERSHIP_LAG_SECONDS = 120.0
SLOW_JOIN_SECONDS = (300.0, 1500.0)
# past ``MAX_PROVISION_SECONDS``: the replenisher's ticks (every 2 minutes, two cleanups each) and a lock held by others
NODELESS_BOUND_SECONDS = 1800.0
IN_SERVICE = "InService"


@dataclass
class Unwell:
    """The nodes a ``node_not_ready`` fault holds NotReady now: name -> (since, simulated seconds; a master).
    ``mark_max_age``: how old a ``MEMBERSHIP`` mark the refresher still trusts (its ``membership_max_age_seconds``,
    set by ``World.build``)."""

    nodes: dict[str, tuple[float, bool]] = field(default_factory=dict)
    mark_max_age: float = 600.0

    def workers(self) -> frozenset[str]:
        """The worker nodes among them (invariant 1 counts them as Ready)."""
        return frozenset(name for name, (_since, master) in self.nodes.items() if not master)

    def recent(self, name: str, t: float) -> bool:
        """Whether ``name`` went NotReady by the fault less than ``MEMBERSHIP_LAG_SECONDS`` before ``t``."""
        held = self.nodes.get(name)
        return held is not None and t - held[0] < MEMBERSHIP_LAG_SECONDS

    def unknown(self, name: str, t: float, mark: dict[str, Any] | None) -> bool:
        """Whether no Lambda could know at ``t`` that ``name`` is NotReady by the fault: it went NotReady lately
        (``recent``), or the agent has written no ``MEMBERSHIP`` mark (``mark``, the item as stored) since it did
        (its Kubernetes reads refused, or it down: its last word still says Ready) while that mark is one the
        refresher still trusts (at most ``mark_max_age`` old; past it no record counts as Ready, so a master
        terminated then was terminated blind: storm seed 185279)."""
        held = self.nodes.get(name)
        if held is None or self.recent(name, t):
            return held is not None
        if mark is None or not mark.get("reported_at"):
            return False
        at = seconds_of(str(mark["reported_at"]))
        return at < held[0] and t - at <= self.mark_max_age


@dataclass(frozen=True)
class Bootstrap:
    """A ``bad_bootstrap`` window: instances of ``az`` entering ``running`` in ``[start, end)`` join late or never."""

    az: str
    start: float
    end: float
    never: bool


def node_not_ready(world: World, f: Fault) -> None:
    """Turn one Ready node NotReady for ``f.duration`` (module docstring): a master when ``f.param("master")``, else
    a worker; the ``pick`` fraction chooses among them in name order (none Ready: nothing happens)."""
    master = bool(int(f.param("master", 0)))
    kube, unwell = world.kube, world.checker.unwell
    names = sorted(
        name
        for name, obj in kube.nodes.items()
        if is_ready(obj) and name not in unwell.nodes and is_control_plane(obj["metadata"]["labels"]) == master
    )
    if not names:
        return
    name = names[min(len(names) - 1, int(float(f.param("pick", 0.0)) * len(names)))]
    unwell.nodes[name] = (world.kernel.t, master)
    kube.set_node_ready(name, False)

    def back() -> None:
        unwell.nodes.pop(name, None)
        if name in kube.nodes:
            kube.set_node_ready(name, True)

    world.kernel.after(f.duration, "fault node ready again", back)


def bad_bootstrap(world: World, f: Fault) -> None:
    """Open a ``Bootstrap`` window of ``f.duration`` in ``f.param("az")`` (module docstring)."""
    t = world.kernel.t
    world.bootstrap.append(Bootstrap(str(f.param("az")), t, t + f.duration, bool(int(f.param("never", 0)))))


def join_delay(world: World, instance: Any, delay: float) -> float | None:
    """The seconds after ``running`` at which ``instance``'s node joins: ``delay`` (drawn as ever), later under a
    ``Bootstrap`` window of its AZ open now, or None (never)."""
    t = world.kernel.t
    window = next((w for w in world.bootstrap if w.az == instance.zone and w.start <= t < w.end), None)
    if window is None:
        return delay
    if window.never:
        return None
    return delay + world.kernel.stream("world:bootstrap").uniform(*SLOW_JOIN_SECONDS)


def nodeless_left(world: World) -> None:
    """End check: every instance InService in a group has a node, or joined lately. An instance a bad bootstrap
    left without one is the replenisher's cleanup's to replace (``MAX_PROVISION_SECONDS`` after its launch, at most
    ``CLEANUP_LIMIT`` an invocation, never in a group a refresh run holds: such a run is judged by its liveness), so
    one still there ``NODELESS_BOUND_SECONDS`` past that was left running for good, its desired capacity unserved.

    Raises:
        Violation: ("8 an instance that never registers a node is replaced within a bound").
    """
    settings = world.lambdas.replenisher_settings
    bound = settings.max_provision_seconds + NODELESS_BOUND_SECONDS
    t, nodes = world.kernel.t, world.kube.instances
    busy = world.checker.busy_groups()
    left = sorted(
        i.instance_id
        for i in world.cloud.instances.values()
        if i.group is not None
        and i.group not in busy
        and i.lifecycle_state == IN_SERVICE
        and i.instance_id not in nodes
        and t - i.started > bound
    )
    if left:
        world.checker.fail(
            "8 an instance that never registers a node is replaced within a bound",
            f"{len(left)} instances InService without a node for over {bound:.0f} s: {left[:5]}",
        )
