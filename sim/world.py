"""One simulated kOps Spot cluster under the product's control: every component wired on one kernel (issue 12).

``World.build`` makes the cluster (worker groups, one per AZ, on Spot; one or three control-plane groups On-Demand;
Deployments, a DaemonSet, PodDisruptionBudgets, some pods with long grace periods), the in-memory AWS account
(``sim.cloud``/``sim.aws``), DynamoDB table (``sim.dynamo``), Kubernetes (``sim.kube``) and agent (``sim.agent``), the
three Lambdas (``sim.lambdas``) behind EventBridge (``sim.eventbridge``) and the invariant checker
(``sim.invariants``). ``apply`` turns a schedule's entries (``sim.schedules``) into scheduled actions; ``run``
runs the kernel with the checker after every step.

The cluster follows kOps' layout ("Instance Groups", kOps documentation: one group per AZ, built with ``minSize`` =
``maxSize``, room given by a schedule's ``kops_spec`` entries, ``sim.actors._kops_spec``; tags ``KubernetesCluster``,
``kops.k8s.io/instancegroup``, ``k8s.io/role/*``); a node joins Kubernetes 30-60 s after its instance is ``running``
(the kubelet's registration) under a private-DNS-style name, so the product must map nodes to instances by
``spec.providerID`` ("Well-Known Labels, Annotations and Taints", Kubernetes documentation).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol

from adapters.dynamo.command_index import INDEX_MARGIN_SECONDS, mark_index
from adapters.dynamo.store import Store
from core.kops import INSTANCE_GROUP_TAG, MASTER_ROLE_TAGS
from core.schema import agent_partition_of, partition_of
from core.settings import AgentSettings
from sim.agent import SimAgent
from sim.agent_worker import EventLog
from sim.aws import SimAws
from sim.cloud import Cloud, TerminationHook
from sim.dynamo import MemoryDynamo
from sim.eventbridge import Delivery, EventBus, stack_rules
from sim.faults import Faults, FaultWindow
from sim.health import Bootstrap, join_delay
from sim.invariants import Bounds, Checker
from sim.kernel import Kernel, Step
from sim.kube import SimKube
from sim.kube_objects import Budget
from sim.lambdas import ACCOUNT, QUEUE_URL, REGION, TABLE, Invocation, Lambdas
from sim.ready_count import SAME_SECOND
from sim.schedules import Fault
from sim.view import View

CLUSTER = "sim.k8s.local"
AZS = ("us-east-1a", "us-east-1b", "us-east-1c")
HOOK = "node-manager-drain"
PARTITIONS = (partition_of(CLUSTER), agent_partition_of(CLUSTER))  # the cluster's items (core.schema)


class AgentLike(Protocol):
    """What the world needs of the agent (``sim.agent.SimAgent``, started when made)."""

    def restart(self, down_seconds: float = 5.0) -> None: ...

    def lead(self, leading: bool) -> None: ...


class NoAgent:
    """No agent in the cluster: commands stay on the queue (a test's world, or the availability benchmark's
    "ASG alone" policy)."""

    def restart(self, down_seconds: float = 5.0) -> None:
        return None

    def lead(self, leading: bool) -> None:
        return None


def agent_settings(**overrides: Any) -> AgentSettings:
    """The agent's settings, built in code (the defaults an operator deploys)."""
    values: dict[str, Any] = {"cluster_name": CLUSTER, "table_name": TABLE, "queue_url": QUEUE_URL}
    return AgentSettings(**{**values, **overrides})


def default_agent(world: World) -> AgentLike:
    """``sim.agent.SimAgent`` on the world's kube, queue, table and Auto Scaling; its result events go onto the
    bus as EventBridge delivers a PutEvents entry."""
    return SimAgent(
        world.kernel,
        world.kube,
        world.aws.queue,
        world.table,
        world.aws.autoscaling,
        agent_settings(),
        events=EventLog(world.put_entry),
    )


@dataclass(frozen=True)
class Shape:
    """The cluster's shape: ``nodes`` Spot workers over the AZs, ``masters`` (1 or 3), workload pods per worker,
    Deployments' size, the fraction of Deployments with a PodDisruptionBudget (``maxUnavailable: 1``) and with a
    long grace period (``long_grace`` seconds); the workers at the start were launched up to ``prelaunch_age``
    seconds before (so the weekly refresh, ``REFRESH_MAX_AGE`` 7 days, has some to replace)."""

    nodes: int = 30
    masters: int = 3
    pods_per_node: int = 4
    replicas: int = 10
    budgeted: float = 0.5
    long_grace_share: float = 0.1
    long_grace: int = 300
    prelaunch_age: float = 1.5 * 86400
    azs: tuple[str, ...] = AZS


@dataclass
class Trace:
    """The run's trace: a running digest of every step and invocation outcome, and the last lines kept."""

    keep: int = 0
    digest: Any = field(default_factory=hashlib.sha256)
    lines: deque[str] = field(default_factory=lambda: deque(maxlen=200000))

    def add(self, line: str) -> None:
        self.digest.update(line.encode())
        self.digest.update(b"\n")
        if self.keep:
            self.lines.append(line)


class World:
    """Every component of one simulated cluster (see the module docstring). Build with ``World.build``."""

    def __init__(
        self,
        seed: int,
        shape: Shape,
        delivery: Delivery | None = None,
        trace: bool = False,
        agent: Callable[[World], AgentLike] = default_agent,
    ) -> None:
        self.seed = seed
        self.shape = shape
        self.kernel = Kernel(seed)
        self.faults = Faults(self.kernel)
        self.trace = Trace(keep=1 if trace else 0)
        self.lambdas: Lambdas
        self.bus = EventBus(self.kernel, self._invoke, stack_rules(CLUSTER, HOOK), delivery)
        self.history: deque[dict[str, Any]] = deque(maxlen=500)
        self.aws = SimAws(
            self.kernel,
            self.faults,
            self.emit,
            on_running=self._instance_running,
            on_terminated=self._instance_gone,
            account=ACCOUNT,
            region=REGION,
        )
        self.cloud: Cloud = self.aws.cloud
        self.kube = SimKube(self.kernel, self.faults)
        self.dynamo = MemoryDynamo(self.kernel, self.faults, copy_reads=False)  # shared reads: the fast setting
        self.table = self.dynamo.table(TABLE)
        self.lambdas = Lambdas(self.kernel, self.table, self.aws, CLUSTER)
        _quiet_agent_logs()
        self.agent = agent(self)
        self.view = View(self, PARTITIONS)
        factor = self.lambdas.replenisher_settings.donor_max_size_factor
        self.checker = Checker(self.view, seed, Bounds(donor_max_size_factor=factor), clock=self.kernel.monotonic)
        self.checker.unwell.mark_max_age = float(self.lambdas.refresher_settings.membership_max_age_seconds)
        self.lambdas.wire.observers.append(self.checker.on_call)
        self.aws.autoscaling.scaled_in.append(self._scaled_in)
        # group -> (MinSize, MaxSize, size) of its kOps spec (the size: its desired capacity at the start; a spec
        # edit keeps it, ``kops_spec``)
        self.sizes: dict[str, tuple[int, int, int]] = {}
        # group -> (desired, MaxSize) the group ends at when nothing of ours is left in it: what the end check ("4
        # sizes end where they were") and the shortfall bound compare with; a kOps spec edit moves it
        self.sizes_at_start: dict[str, tuple[int, int]] = {}
        # group -> MaxSizes the end check also accepts: a spec edit wrote a MaxSize the product cannot tell from its
        # own raise, which it restores to the original (``sim.actors._kops_spec``)
        self.restore_excused: dict[str, set[int]] = {}
        self.spec_originals: dict[str, set[int]] = {}  # group -> its MaxSizes before a spec edit raised it
        self.kops_taken = 0  # desired capacity units kOps' writes clamped away (``sim.actors._kops_write``)
        self._bad: dict[str, str] = {}  # event id -> how it is bad
        self.operators: set[str] = set()
        self.operator_uncordoned: dict[str, float] = {}  # node -> simulated second of an operator's last uncordon
        self._joined = 0
        self._rng = self.kernel.stream("world:targets")
        self._join = self.kernel.stream("world:join")
        self.bootstrap: list[Bootstrap] = []  # ``bad_bootstrap`` windows (``sim.health``)

    # construction -----------------------------------------------------------------------------------------------
    @classmethod
    def build(
        cls, seed: int, shape: Shape | None = None, delivery: Delivery | None = None, trace: bool = False
    ) -> World:
        """A steady cluster at simulated second 0, every loop started."""
        world = cls(seed, shape or Shape(), delivery, trace)
        world._populate()
        return world

    def _populate(self) -> None:
        with self.kernel.installed():
            self._populate_now()

    def _populate_now(self) -> None:
        s = self.shape
        hook = (TerminationHook(HOOK, heartbeat_timeout=300),)
        per_az = [s.nodes // len(s.azs) + (1 if i < s.nodes % len(s.azs) else 0) for i in range(len(s.azs))]
        for az, count in zip(s.azs, per_az, strict=True):
            name = f"nodes-{az}"
            self._group(name, name, (az,), count, spot=True, control_plane=False, hooks=hook)
        for az in s.azs[: s.masters]:
            name = f"master-{az}"
            self._group(name, name, (az,), 1, spot=False, control_plane=True, hooks=())
        self.kube.add_daemonset("kube-system", "node-agent", grace=30)
        workload = s.nodes * s.pods_per_node
        deployments = max(1, workload // s.replicas)
        for i in range(deployments):
            name = f"app-{i:04d}"
            grace = s.long_grace if (i * s.long_grace_share) % 1 + s.long_grace_share >= 1 else None
            self.kube.add_deployment("default", name, s.replicas, grace=grace)
            if (i * s.budgeted) % 1 + s.budgeted >= 1:
                self.kube.add_budget(Budget("default", f"{name}-pdb", {"app": name}, max_unavailable=1))
        # the cluster has run this version for longer than a command TTL: the command index is complete and its
        # pointers answer from the first step (``adapters.dynamo.command_index``; its upgrade week is unit-tested)
        ttl = AgentSettings.model_fields["command_ttl_seconds"].default
        before = self.kernel.now() - timedelta(seconds=ttl + INDEX_MARGIN_SECONDS + 60)
        mark_index(Store(self.table, CLUSTER), ttl, before)
        self.aws.start()
        self.bus.schedule_rules()

    def _group(
        self,
        name: str,
        instance_group: str,
        zones: tuple[str, ...],
        size: int,
        *,
        spot: bool,
        control_plane: bool,
        hooks: tuple[TerminationHook, ...],
    ) -> None:
        self.cloud.add_group(
            name,
            cluster=CLUSTER,
            instance_group=instance_group,
            zones=zones,
            min_size=size,
            max_size=size,
            desired=size,
            spot=spot,
            control_plane=control_plane,
            instance_type="m5.large" if spot else "c5.large",
            hooks=hooks,
            prelaunch_age=self.shape.prelaunch_age if spot else 0.0,
        )
        self.sizes[name] = (size, size, size)
        self.sizes_at_start[name] = (size, size)

    # wiring -------------------------------------------------------------------------------------------------------
    def emit(self, event: dict[str, Any]) -> None:
        """An event onto the bus (AWS's and the agent's), recorded in the trace and the late-event history."""
        raw = event.get("detail")
        detail: dict[str, Any] = raw if isinstance(raw, dict) else {}
        about = detail.get("instance-id") or detail.get("EC2InstanceId") or detail.get("instance_id") or ""
        self.trace.add(f"{self.kernel.t:.3f} event {event.get('detail-type')} {about} {event.get('id')}")
        self.history.append(event)
        self.bus.put(event)

    def put_entry(self, entry: dict[str, Any]) -> None:
        """A PutEvents entry (``Source``, ``DetailType``, ``Detail`` as JSON text, ``Resources``) as the event
        EventBridge makes of it."""
        detail = entry.get("Detail")
        try:
            parsed = json.loads(detail) if isinstance(detail, str) else {}
        except ValueError:
            parsed = {"unparsed": detail}
        resources = [str(r) for r in entry.get("Resources") or []]
        self.emit(self.bus.envelope(str(entry.get("Source")), str(entry.get("DetailType")), parsed, resources))

    def _invoke(
        self,
        function: str,
        event: dict[str, Any],
        crash_at: int = 0,
        crash_kind: str = "crash",
        interleave_at: int = 0,
        interleave: Callable[[], None] | None = None,
    ) -> Invocation:
        outer = self.checker.bad_input
        self.checker.bad_input = str(event.get("id")) in self._bad
        try:
            result = self.lambdas.invoke(function, event, crash_at, crash_kind, interleave_at, interleave)
        finally:
            self.checker.bad_input = outer
        response = result.response or {}
        unread = self._bad.get(str(event.get("id"))) in ("malformed", "foreign_account", "foreign_region")
        if unread and result.status == "error":  # input refused before any read: nothing may fail
            self.checker.t = self.kernel.t
            self.checker.fail("7 bad input changes nothing", f"{function} failed on bad input: {result.error}")
        actions = response.get("actions") or []
        self.trace.add(
            f"{self.kernel.t:.3f} {function} {result.status} {response.get('status', '')} "
            f"{response.get('reason', '')} {response.get('instance_id', '')} {result.error} {actions}"
        )
        return result

    def _instance_running(self, instance: Any) -> None:
        """The instance is ``running``: its kubelet registers the node 30-60 s later (if it still runs then)."""
        delay = join_delay(self, instance, 0.0 if self.kernel.t == 0 else self._join.uniform(30, 60))
        if delay is not None:  # None: a bootstrap that never registers the node (``sim.health``)
            self.kernel.after(delay, "kube:join", lambda: self._join_node(instance))

    def _join_node(self, instance: Any) -> None:
        if not instance.alive:
            return
        self._joined += 1
        tags = instance.tags
        control_plane = not tags.keys().isdisjoint(MASTER_ROLE_TAGS)
        self.kube.add_node(
            f"ip-10-{self._joined // 65536 % 256}-{self._joined // 256 % 256}-{self._joined % 256}.ec2.internal",
            instance.instance_id,
            instance.zone,
            instance_group=tags.get(INSTANCE_GROUP_TAG, ""),
            control_plane=control_plane,
        )

    def _scaled_in(self, group: str, count: int) -> None:
        """An UpdateAutoScalingGroup of a Lambda's lowered ``group``'s desired capacity below its instances: Auto
        Scaling terminates ``count`` of its own choosing, which the product never asks for (docs/DESIGN.md: a
        lowering never below the instance count, a MaxSize never restored below desired capacity)."""
        self.checker.t = self.kernel.t
        what = f"an UpdateAutoScalingGroup of {group} left {count} instances above its desired capacity"
        self.checker.fail("4 no size change of ours lets Auto Scaling choose instances to scale in", what)

    def _instance_gone(self, instance: Any) -> None:
        self.kube.remove_instance(instance.instance_id)
        if instance.reclaim_at is not None and instance.gone_at >= instance.reclaim_at - SAME_SECOND:  # Spot took it
            self.checker.ready.spot_reclaimed(instance.instance_id, instance.reclaim_warned, instance.gone_at)

    # running ----------------------------------------------------------------------------------------------------------
    def run(self, until: float, after_step: Callable[[Step], None] | None = None) -> None:
        """Run to simulated second ``until``, the checker after every step it asks to see (``Checker.after_step``
        answers when its next check is due), ``after_step`` after every step (raises ``Violation``)."""
        checker = self.checker

        def after(step: Step) -> None:
            checker.after_step(step)
            if after_step is not None:
                after_step(step)

        with self.kernel.installed():  # every utcnow() default of the product (the agent's Store calls too)
            self.kernel.run(until, checker.after_step if after_step is None else after)

    # faults -----------------------------------------------------------------------------------------------------------
    def apply(self, schedule: tuple[Fault, ...]) -> None:
        """Schedule every entry of ``schedule``."""
        for fault in schedule:
            self.kernel.at(fault.at, f"fault {fault.kind}", lambda f=fault: self._fault(f))  # type: ignore[misc]  # default binds the entry

    def _fault(self, f: Fault) -> None:
        from sim.actors import apply_fault

        self.trace.add(f"{self.kernel.t:.3f} fault {f.kind} {f.params}")
        apply_fault(self, f)

    def pick_instance(self, az: str, spot: bool = True, master: bool = False) -> str | None:
        """A running instance of a group in ``az`` (Spot workers by default), from the world's stream."""
        ids = sorted(
            i.instance_id
            for i in self.cloud.instances.values()
            if i.alive
            and i.zone == az
            and i.group is not None
            and (i.lifecycle == "spot") == spot
            and ("k8s.io/role/node" not in i.tags) == master
            and i.reclaim_at is None
        )
        return self._rng.choice(ids) if ids else None

    def add_fault_window(self, window: FaultWindow) -> None:
        self.faults.add(window)

    def mark_bad(self, event_id: str, variant: str) -> None:
        self._bad[event_id] = variant

    def operator_cordon(self, node: str, cordoned: bool) -> None:
        """An operator's ``kubectl cordon`` (``cordoned``) or ``uncordon`` of ``node``, told to the checker; an
        uncordon's time is kept (``operator_uncordoned``: the watch does not count a drain's node the operator made
        schedulable again against the drain's cordon)."""
        if cordoned:
            self.operators.add(node)
        else:
            self.operators.discard(node)
            self.operator_uncordoned[node] = self.kernel.t
        self.checker.operator_cordon(node, cordoned)


def _quiet_agent_logs() -> None:
    """The agent's modules log each retried call (with its traceback) through ``logging``; a simulated week makes
    thousands. Only critical lines are kept (the trace and the counters say what happened)."""
    for name in ("agent", "sim.agent", "sim.agent_drain", "adapters"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
