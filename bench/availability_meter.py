"""The availability benchmark's meter (``bench.availability``): what it counts as capacity at each sample, and why
each missing node-minute is missing (``Causes``: what each instance of a group was launched to replace).

Split from ``bench.availability`` (which runs the policies and prints the tables) so each module stays under the
project's 400 lines; its module docstring says what is measured and why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent.kube.views import CORDON_ANNOTATION
from core.kops import INSTANCE_GROUP_TAG, pool_of
from sim.world import World

SAMPLE_SECONDS = 60.0
WARMUP_SECONDS = 900.0  # the cluster's first nodes register in the first minutes: not a loss of any policy

LOSS_RECLAIM = "replacing a Spot reclaim (health check)"
LOSS_DETACH = "replacing a detached instance (early replacement)"
LOSS_TERMINATE = "replacing a terminated instance (no decrement)"
LOSS_RAISED = "desired raised (surge, compensation)"
LOSS_OTHER = "replacing another loss"


class Causes:
    """Why each instance of a group was launched: a loss the group replaces (a member EC2 reclaimed, found at the
    group's health check; a member detached or terminated without decrement) or a raised desired capacity, matched
    first in, first out. Wraps the world's ``Cloud`` methods (this world's object only)."""

    def __init__(self, world: World) -> None:
        self.cloud = world.cloud
        self.kernel = world.kernel
        self.pending: dict[str, list[tuple[str, float]]] = {}  # group -> losses not yet replaced
        self.launched: dict[str, tuple[str, float]] = {}  # instance id -> (cause, when the loss happened)
        self.detached_at: dict[str, float] = {}
        cloud = self.cloud
        begin, detach, terminate, set_sizes, launch = (
            cloud._begin_termination,
            cloud.detach,
            cloud.terminate_in_group,
            cloud.set_sizes,
            cloud._launch,
        )

        def _begin_termination(group: Any, inst: Any) -> None:
            if not inst.alive and inst.group == group.name:
                self._lose(group.name, LOSS_RECLAIM if inst.reclaim_at is not None else LOSS_OTHER)
            begin(group, inst)

        def _detach(instance_id: str, decrement: bool) -> None:
            inst = cloud.instances[instance_id]
            if not decrement:
                self._lose(str(inst.group), LOSS_DETACH)
            self.detached_at[instance_id] = self.kernel.t
            detach(instance_id, decrement)

        def _terminate(instance_id: str, decrement: bool) -> None:
            inst = cloud.instances[instance_id]
            if not decrement and inst.alive and inst.lifecycle_state in ("Pending", "InService"):
                self._lose(str(inst.group), LOSS_TERMINATE)
            terminate(instance_id, decrement)

        def _set_sizes(name: str, min_size: int, max_size: int, desired: int) -> None:
            for _ in range(desired - cloud.groups[name].desired):
                self._lose(name, LOSS_RAISED)
            set_sizes(name, min_size, max_size, desired)

        def _launch(group: Any, zone: str | None, booted: bool = False) -> Any:
            inst = launch(group, zone, booted)
            if not booted:
                queue = self.pending.get(group.name) or [(LOSS_OTHER, self.kernel.t)]
                self.launched[inst.instance_id] = queue.pop(0)
            return inst

        cloud._begin_termination = _begin_termination  # type: ignore[method-assign]
        cloud.detach = _detach  # type: ignore[method-assign]
        cloud.terminate_in_group = _terminate  # type: ignore[method-assign]
        cloud.set_sizes = _set_sizes  # type: ignore[method-assign]
        cloud._launch = _launch  # type: ignore[method-assign]

    def _lose(self, group: str, cause: str) -> None:
        self.pending.setdefault(group, []).append((cause, self.kernel.t))


def _ready(obj: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in obj["status"].get("conditions", ()))


@dataclass
class Meter:
    """What a policy's run measured (see the module docstring).

    Capacity counts Ready nodes by the kOps instance group their instance was launched for (its
    ``kops.k8s.io/instancegroup`` tag), whether an Auto Scaling group still holds the instance or not: a node whose
    instance the product detached for an early replacement runs and is Ready until EC2 reclaims it, as the same
    node does under the ASG alone (``below``). ``below_member`` is the count the first version of this benchmark
    made (only instances a group holds), ``below_schedulable`` counts Ready nodes not cordoned (a node draining on a
    warning is not counted), ``below_pool`` the pool's total (a compensation in a sibling AZ counts)."""

    policy: str
    sample_seconds: float = SAMPLE_SECONDS
    below: dict[str, float] = field(default_factory=dict)  # group -> node-minutes below desired
    below_member: dict[str, float] = field(default_factory=dict)
    below_schedulable: dict[str, float] = field(default_factory=dict)
    below_pool: dict[str, float] = field(default_factory=dict)  # pool -> node-minutes below its groups' total
    longest: float = 0.0  # seconds, any group (``below``)
    _since: dict[str, float] = field(default_factory=dict)
    extra_instance_seconds: float = 0.0
    base_instance_seconds: float = 0.0
    cpu: float = 0.0
    counters: dict[str, float] = field(default_factory=dict)
    causes: Causes | None = None
    why: dict[str, float] = field(default_factory=dict)  # cause -> node-minutes (of ``below_member``)
    cordoned: dict[str, float] = field(default_factory=dict)  # command kind -> node-minutes of Ready cordoned nodes
    pending_at_warmup: float | None = None  # unschedulable pod-seconds before the first sample (the cluster's start)

    def sample(self, world: World, t: float) -> None:
        """Add the state at simulated second ``t`` as held for ``sample_seconds`` (nothing during the warm-up)."""
        if t < WARMUP_SECONDS:
            return
        if self.pending_at_warmup is None:
            self.pending_at_warmup = world.kube.unschedulable_pod_seconds
        minutes = self.sample_seconds / 60
        member: dict[str, int] = {}
        tagged: dict[str, int] = {}
        schedulable: dict[str, int] = {}
        node_ready: dict[str, bool] = {}
        for obj in world.kube.nodes.values():
            instance_id = str(obj["spec"].get("providerID", "")).rsplit("/", 1)[-1]
            node_ready[instance_id] = ok = _ready(obj)
            instance = world.cloud.instances.get(instance_id)
            if not ok or instance is None or not instance.alive:
                continue
            if instance.group is not None:
                member[instance.group] = member.get(instance.group, 0) + 1
            name = instance.tags.get(INSTANCE_GROUP_TAG, "")
            tagged[name] = tagged.get(name, 0) + 1
            if not obj["spec"].get("unschedulable"):
                schedulable[name] = schedulable.get(name, 0) + 1
            else:
                by = str((obj["metadata"].get("annotations") or {}).get(CORDON_ANNOTATION, "unannotated"))
                reason = by.split("-", 1)[0]
                self.cordoned[reason] = self.cordoned.get(reason, 0.0) + minutes
        base = world.view.baseline()
        pools: dict[str, int] = {}
        for name, (desired, _max) in sorted(base.items()):
            if name.startswith("master-"):
                continue
            group = world.cloud.groups[name]
            pool = pool_of(group.tags, group.zones) or name
            pools[pool] = pools.get(pool, 0) + desired - tagged.get(name, 0)
            short = max(0, desired - tagged.get(name, 0))
            self.below[name] = self.below.get(name, 0.0) + short * minutes
            self.below_schedulable[name] = (
                self.below_schedulable.get(name, 0.0) + max(0, desired - schedulable.get(name, 0)) * minutes
            )
            short_member = max(0, desired - member.get(name, 0))
            self.below_member[name] = self.below_member.get(name, 0.0) + short_member * minutes
            if short:
                since = self._since.setdefault(name, t)
                self.longest = max(self.longest, t - since + self.sample_seconds)
            else:
                self._since.pop(name, None)
            if short_member:
                for cause, n in self._explain(world, name, desired, short_member, node_ready).items():
                    self.why[cause] = self.why.get(cause, 0.0) + n * minutes
        for pool, short_pool in pools.items():
            self.below_pool[pool] = self.below_pool.get(pool, 0.0) + max(0, short_pool) * minutes
        alive = sum(1 for i in world.cloud.instances.values() if i.alive)
        wanted = sum(d for d, _ in base.values())
        self.extra_instance_seconds += max(0, alive - wanted) * self.sample_seconds
        self.base_instance_seconds += wanted * self.sample_seconds

    def _explain(
        self, world: World, name: str, desired: int, short: int, node_ready: dict[str, bool]
    ) -> dict[str, int]:
        """``short`` missing Ready nodes of group ``name`` split by cause, in this order: a detached instance of the
        group still running with its node Ready (counted as lost by ``below``, not by ``below_tagged``); members
        counting toward the desired capacity whose node is not Ready (by why they were launched, and whether the
        instance is booting, its node not registered yet, or the instance dead awaiting the group's health check);
        instances the group has not launched (an outage, a backoff, the next reconcile); the group's desired
        capacity below its kOps size; the rest is "unexplained"."""
        group = world.cloud.groups[name]
        out: dict[str, int] = {}
        left = short

        def add(cause: str, n: int) -> None:
            nonlocal left
            n = min(n, left)
            if n > 0:
                out[cause] = out.get(cause, 0) + n
                left -= n

        detached = [
            i
            for i in world.cloud.instances.values()
            if i.group is None and i.alive and i.tags.get(INSTANCE_GROUP_TAG) == name and node_ready.get(i.instance_id)
        ]
        add("measure: detached instance still running, node Ready", len(detached))
        active = group.active()
        for inst in active:
            if node_ready.get(inst.instance_id):
                continue
            if not inst.alive:
                add("reclaimed, awaiting the group's health check", 1)
                continue
            cause = self.causes.launched.get(inst.instance_id, (LOSS_OTHER, 0.0))[0] if self.causes else LOSS_OTHER
            phase = "booting" if inst.state == "pending" else "node not registered yet"
            add(f"{cause}: {phase}", 1)
        missing = group.desired - len(active)
        if missing > 0:
            outage = any(o.covers((group.instance_type, group.zones[0]), world.kernel.t) for o in world.cloud.outages)
            if outage:
                add("not launched: capacity outage", missing)
            elif group.launch_failures:
                add("not launched: launch backoff after an outage", missing)
            else:
                add("not launched yet: next Auto Scaling reconcile", missing)
        add("group desired capacity below its kOps size", desired - group.desired)
        add("unexplained", left)
        return out
