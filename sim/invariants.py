"""The design's safety invariants and liveness bounds, checked after every simulated step (issue 12).

The invariants are docs/DESIGN.md's "Safety invariants" (1-8). Two kinds of checks keep a 1,000-node week fast:

- at the effect: every AWS call a Lambda makes is seen before it is made (``sim.lambdas.Tripwire`` observers), and
  the checks that concern it run then, against the world as it is (a terminate before a drain, a capacity increase
  not recorded first, a master surged, an effect of an invocation on bad input);
- on the state: a scan of groups, nodes and the table's items, after a step only when ``scan_seconds`` of simulated
  time passed since the last scan (Ready workers during a refresh, masters, cordons, a lock or a run past its
  bound, a shortfall left uncovered), and once at the end of the run (sizes back where they were, nothing detached
  left running, no cordon of ours left on a surviving instance).

A violation names the invariant, the simulated time and the seed (``Violation``); the run stops at the first one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from core.lifecycle import LifecycleAction
from sim.drain_items import drain_had_its_chance, unreachable_command
from sim.foreign import Foreign
from sim.health import Unwell
from sim.kernel import EPOCH, Step
from sim.ready_count import ReadyCount, moment
from sim.world_view import GroupState, NodeIndex, NodeState, WorldView

ACTIVE_RUN = ("running", "pausing", "cancelling")  # core.runs.RunStatus.active
# simulated seconds a check's hook asks to be called before its next check is due: ``at - last >= period`` and
# ``at >= last + period`` may differ by float rounding (a few ulps of a week's seconds, ~1e-10), the test stays its own
EARLY = 1e-6
WRITES = (
    "autoscaling.set_capacity",
    "autoscaling.terminate_in_group",
    "autoscaling.detach_instance",
    "autoscaling.complete_lifecycle_action",
    "ec2.terminate",
)


@dataclass
class Violation(BaseException):  # as LambdaCrash: no `except Exception` of the product may swallow it
    """An invariant broken: which, when (simulated seconds), the seed, and what was seen."""

    invariant: str
    at: float
    seed: int
    detail: str

    def __str__(self) -> str:
        return f"seed {self.seed}: {self.invariant} broken at t={self.at:.0f}s ({self.at / 3600:.2f} h): {self.detail}"


@dataclass
class Bounds:
    """Liveness bounds (seconds) and the scan cadence."""

    scan_seconds: float = 60.0
    lock_held: float = 3600.0  # one holder keeping the lock continuously
    run_stalled: float = 4 * 3600.0  # a run whose item did not change
    shortfall: float = 3600.0  # a pool below desired while a sibling AZ has no outage and room to grow
    # a sibling's room: up to this factor of its kOps MaxSize (the replenisher's ``donor_max_size_factor``, a cap the
    # issue asks every raise to keep: ``lambdas.replenisher.decide.compensate.headroom``)
    donor_max_size_factor: float = 2.0
    cordon: float = 4 * 3600.0  # a cordon of ours on a running instance with no active command


@dataclass
class Checker:
    """Checks one run's world; ``after_step`` is the kernel's hook, ``on_call`` the Lambdas' call observer.

    Args:
        view: the world.
        seed: the run's seed (named in violations).
        bounds: liveness bounds.
    """

    view: WorldView
    seed: int
    bounds: Bounds = field(default_factory=Bounds)
    clock: Callable[[], float] | None = None  # the kernel's time (checks at an effect run inside a step)
    t: float = 0.0
    bad_input: bool = False  # the invocation under way was given bad input (set by the world)
    checks: int = 0
    _last_scan: float = -1e18
    _lock: tuple[str, float] | None = None  # (holder, since)
    _runs: dict[str, tuple[str, float]] = field(default_factory=dict)  # run id -> (updated_at, since)
    _short: dict[str, float] = field(default_factory=dict)  # pool -> since
    _cordons: dict[str, float] = field(default_factory=dict)  # node -> since
    ready: ReadyCount = field(default_factory=ReadyCount)  # invariant 1's starts, and the Spot reclaims it excuses
    refreshed: set[str] = field(default_factory=set)  # instances the refresher terminated
    _known: dict[str, str] = field(default_factory=dict)  # node -> instance, at the last scan
    _indexed: NodeIndex | None = None  # the nodes _known was last brought up to (the view's, while unchanged)
    _gone: dict[str, str] = field(default_factory=dict)  # nodes gone since, -> instance
    _gone_refreshed: set[str] = field(default_factory=set)  # of ``_gone``, those of ``refreshed``, kept as both change
    _gone_of: dict[str, set[str]] = field(default_factory=dict)  # instance -> its nodes in ``_gone``
    _nodes_of: tuple[dict[str, str], dict[str, str] | None] | None = None  # an index's instance_of, instance -> node
    _operator_cordons: set[str] = field(default_factory=set)
    unwell: Unwell = field(default_factory=Unwell)  # nodes a fault holds NotReady (``sim.health``)
    foreign: Foreign = field(default_factory=Foreign)  # what other tools terminated (``sim.foreign``)

    def fail(self, invariant: str, detail: str) -> None:
        raise Violation(invariant, self.t, self.seed, detail)

    def _now(self) -> None:
        if self.clock is not None:
            self.t = self.clock()

    # effects -------------------------------------------------------------------------------------------------------
    def on_call(self, function: str, call: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """A Lambda is about to make ``call``: check what concerns it."""
        if call not in WRITES:
            return
        self._now()
        self.checks += 1
        if self.bad_input:
            self.fail("7 bad input changes nothing", f"{function} called {call}{args} on bad input")
        if call == "autoscaling.set_capacity":
            self._capacity(function, *args, **kwargs)
        elif call in ("autoscaling.terminate_in_group", "ec2.terminate", "autoscaling.complete_lifecycle_action"):
            ids = _instance_ids(call, args, kwargs)
            for instance_id in ids:
                if function == "refresher" and instance_id not in self.foreign.terminated:  # gone already if so
                    self.refresher_terminated(instance_id)
                self._terminate(function, call, instance_id)

    def _capacity(self, function: str, asg_name: str, desired: int | None, max_size: int | None) -> None:
        group = next((g for g in self.view.group_states() if g.name == asg_name), None)
        if group is None:
            return
        raised = (desired is not None and desired > group.desired) or (
            max_size is not None and max_size > group.max_size
        )
        if not raised:
            return
        if group.master:
            self.fail("2 masters never surged or compensated", f"{function} raised master group {asg_name}")
        items = self.view.table_items()
        lock = next((i for i in items if i.get("sk") == "LOCK"), None) or {}
        holder = str(lock.get("holder", ""))
        held = float(lock.get("lease_expires_at", 0)) > view_epoch(self.t) and holder.startswith(f"{function}:")
        if function in ("replenisher", "refresher") and not held:
            self.fail(
                "9 a capacity change is made under the current lock holder's lease",
                f"{function} raised {asg_name} while the lock is {holder or 'free'} "
                f"(lease until {lock.get('lease_expires_at')})",
            )
        recorded = any(
            (str(i.get("sk", "")).startswith("COMP#") and asg_name in str(i))
            or (str(i.get("sk", "")).startswith("RUN#") and asg_name in str(i.get("surge", {})))
            for i in items
        )
        if not recorded:
            self.fail(
                "4 every capacity increase recorded before it is made",
                f"{function} raised {asg_name} ({group.desired}/{group.max_size} -> {desired}/{max_size}) "
                "with no COMP# or RUN# surge item naming it",
            )

    def _terminate(self, function: str, call: str, instance_id: str) -> None:
        nodes = self.view.node_states()
        node = next((n for n in nodes if n.instance_id == instance_id), None)
        if node is None:
            return
        if node.master and function == "refresher":
            out = self.refreshed  # masters the refresher terminated, in a lifecycle wait still: going (seed 191142)
            down = [n.name for n in nodes if n.master and not (n.ready or n.name == node.name or n.instance_id in out)]
            mark = self.view.table_item("MEMBERSHIP")  # a fault the agent has not reported yet: unknown to Lambdas
            down = [name for name in down if not self.unwell.unknown(name, self.t, mark)]
            if down:
                self.fail(
                    "2 masters one at a time, only while all Ready", f"{call} {instance_id} while {down} not Ready"
                )
        movable = self.view.movable_pods(node.name) if node.ready else 0
        if movable == 0 or (call == "autoscaling.terminate_in_group" and self._registered_unknown(node)):
            return  # the latter: its group's termination hook drains it (judged as the action is completed)
        commands = [
            i
            for i in self.view.table_items()
            if str(i.get("sk", "")).startswith("CMD#")
            and i.get("instance_id") == instance_id
            and i.get("kind") == "drain"
        ]
        past = any(drain_had_its_chance(i, self.t) for i in commands)
        if not past:
            self.fail(
                "3 no termination before drain",
                f"{function} {call} {instance_id}: node {node.name} still has {movable} pods to move and "
                f"no drain of it finished or passed its deadline",
            )

    def _registered_unknown(self, node: NodeState) -> bool:
        """Whether ``node`` registered after the agent's last ``MEMBERSHIP`` mark: no Lambda could know it has a node
        (an instance absent from a confirmed list is taken as nodeless: a spare given back, the replenisher's cleanup;
        storm seed 210054). Every group the simulation builds has the termination lifecycle hook, whose drain the
        interruption Lambda makes before it completes the action (``autoscaling.complete_lifecycle_action``, judged
        here as any termination)."""
        mark = self.view.table_item("MEMBERSHIP")
        if not node.created or mark is None or not mark.get("reported_at"):
            return False
        created = datetime.fromisoformat(node.created.replace("Z", "+00:00"))
        return created > datetime.fromisoformat(str(mark["reported_at"]))

    # state ---------------------------------------------------------------------------------------------------------
    def refresher_terminated(self, instance_id: str) -> None:
        """The refresher terminated ``instance_id`` (or completed its lifecycle action): it is one of ``refreshed``."""
        seen = moment(self.view, self.unwell, instance_id, self.t)  # its group as a Lambda could see it
        self.ready.refresher_terminated(self.t, seen, instance_id not in self.refreshed, instance_id)
        if instance_id not in self.refreshed:
            self.refreshed.add(instance_id)
            self._gone_refreshed |= self._gone_of.get(instance_id, set())

    def _went(self, name: str, instance: str) -> None:
        """Node ``name`` of ``instance`` is no longer listed: one of ``_gone`` (in place of what it held before)."""
        if (before := self._gone.get(name)) is not None:
            self._gone_of[before].discard(name)
        self._gone[name] = instance
        self._gone_of.setdefault(instance, set()).add(name)
        (self._gone_refreshed.add if instance in self.refreshed else self._gone_refreshed.discard)(name)

    def operator_cordon(self, node: str, cordoned: bool) -> None:
        """The schedule's operator cordoned (or uncordoned) ``node`` with kubectl."""
        (self._operator_cordons.add if cordoned else self._operator_cordons.discard)(node)

    def after_step(self, step: Step) -> float | None:
        """The kernel's hook: a scan when ``scan_seconds`` passed since the last. Answers when the next one may be
        due (``Kernel.run``: the steps before it are not shown to the hook; nothing else here reads ``t`` without
        setting it first), ``EARLY`` before the scan's own test can hold (a replacement answering None is shown
        every step)."""
        self.t = step.at
        if step.at - self._last_scan >= self.bounds.scan_seconds:
            self._last_scan = step.at
            self.scan()
        return self._last_scan + self.bounds.scan_seconds - EARLY

    def _refreshed_nodes(self, index: NodeIndex) -> set[str]:
        """The listed nodes whose instance the refresher terminated, by set operations on the refreshed instances
        (not a look-up for every node of a run's start at every scan); by a walk over the nodes when two of them
        name the same instance."""
        instance_of, kept = index.instance_of, self._nodes_of
        if kept is None or kept[0] is not instance_of:  # the index's map is made anew when the nodes change
            reverse = dict(zip(instance_of.values(), instance_of.keys(), strict=True))
            kept = self._nodes_of = (instance_of, reverse if len(reverse) == len(instance_of) else None)
        by_instance = kept[1]
        if by_instance is None:
            return {name for name, instance in instance_of.items() if instance in self.refreshed}
        return set(map(by_instance.__getitem__, self.refreshed & by_instance.keys()))

    def scan(self) -> None:
        """Check the state's invariants and liveness bounds now.

        Reads only the table items the checks name (``CMD#``, ``RUN#``, ``LOCK``: ranges of the partition's sort
        keys, not the ``NODE#`` items), and of the nodes what the view's ``NodeIndex`` holds (made once per change
        of the nodes): when nothing changed a scan looks at the cordoned nodes, the groups and the items only, not
        at every node (BENCHMARKS.md, "The fleet simulation's speed per seed"). ``tests/unit/sim/test_scan.py``
        checks it against the scan over every node, on random states.
        """
        self.checks += 1
        view, t, b = self.view, self.t, self.bounds
        index = view.node_index()  # the same object while the nodes did not change
        # 6: nobody's cordon but ours is undone; ours does not outlive its instance's commands
        if self._operator_cordons:
            for n in view.node_states():
                if n.name in self._operator_cordons and not n.unschedulable:
                    self.fail("6 others' cordons left alone", f"node {n.name} cordoned by an operator was uncordoned")
        active = view.open_command_instances()
        running = view.running_instances()
        cordons = self._cordons
        held: set[str] = set()  # ours, cordoned, its instance running with no active command: timed
        for n in index.ours_cordoned:  # only those can be; in the nodes' order (the first one past the bound fails)
            if n.instance_id in running and n.instance_id not in active:
                held.add(n.name)
                since = cordons.setdefault(n.name, t)
                if t - since > b.cordon:
                    self.fail("8 a cordon of ours is resolved within a bound", f"node {n.name} cordoned since {since}")
        for name in (cordons.keys() & index.instance_of.keys()) - held:
            del cordons[name]  # a listed node no longer held starts again (a node gone keeps its entry)
        # 1: Ready workers during a refresh (nodes the refresher terminated are replaced by as many new Ready ones;
        # losses to Spot reclaims and outages are not the refresh's, nor a unit kOps' write clamped away since:
        # ``sim.ready_count``) and the listed nodes a fault holds NotReady (nor, at a run's start, its capacity)
        unwell = self.unwell.workers() & index.instance_of.keys() if self.unwell.nodes else frozenset()
        ready_now = index.ready_workers | unwell if unwell else index.ready_workers
        for item in view.table_prefix("RUN#"):
            if item.get("status") not in ACTIVE_RUN:
                continue
            run_id = str(item.get("sk", ""))[4:]
            start = self.ready.started(run_id, ready_now, unwell, index.instance_of, item.get("created_at"))
            lost = self._refreshed_nodes(index) & start
            lost |= start & self._gone_refreshed  # the gone nodes whose instance the refresher terminated
            lost -= ready_now
            counted = self.ready.counted(run_id, ready_now, self.unwell)  # less the spares it did not count
            taken, nodes = view.kops_taken(), view.node_states  # nodes: when a new one registered (sim.ready_count)
            if short := self.ready.short(run_id, counted, index.instance_of, running, t, len(lost), taken, nodes):
                self.fail("1 Ready workers never below the start during a refresh", short)
            updated = str(item.get("updated_at"))
            seen = self._runs.get(run_id)
            if seen is None or seen[0] != updated:
                self._runs[run_id] = (updated, t)
            elif t - seen[1] > b.run_stalled:
                self.fail("8 no run stuck past its deadline", f"run {run_id} unchanged since t={seen[1]:.0f}")
        # the same index (or one with the same map of instances) as last time: _known holds its nodes already
        if self._indexed is None or index.instance_of is not self._indexed.instance_of:
            current = index.instance_of
            for name in sorted(self._known.keys() - current.keys()):
                self._went(name, self._known.pop(name))
            self._known.update(current)
        self._indexed = index
        # 8: the lock
        lock = view.table_item("LOCK")
        holder = str(lock.get("holder")) if lock and float(lock.get("lease_expires_at", 0)) > view_epoch(t) else None
        if holder is None:
            self._lock = None
        elif self._lock is None or self._lock[0] != holder:
            self._lock = (holder, t)
        elif t - self._lock[1] > b.lock_held:
            self.fail("8 no lock held past its bound", f"{holder} holds the lock since t={self._lock[1]:.0f}")
        # 8: shortfalls covered while a sibling AZ is healthy
        self._shortfalls(view.group_states(), view.running_per_group(), view.outage_azs())

    def _shortfalls(self, groups: list[GroupState], per_group: dict[str, int], outages: frozenset[str]) -> None:
        """A worker pool with fewer running instances than its groups' kOps sizes (the baseline) while one of its
        AZs has an outage and another has none, with room to grow, must be made whole (by compensation) within the
        bound. A sibling has room while its desired capacity is under the donor cap (``Bounds
        .donor_max_size_factor`` times its kOps MaxSize, rounded down, as the replenisher caps a raise): when every
        healthy sibling is at its cap (two AZs of three out at once, say), what is short cannot be covered."""
        base = self.view.baseline()
        pools: dict[str, list[GroupState]] = {}
        for g in groups:
            if not g.master:
                pools.setdefault(g.pool, []).append(g)
        factor = self.bounds.donor_max_size_factor
        for pool, members in sorted(pools.items()):
            want = sum(self.foreign.lowest(g.name, base.get(g.name, (g.desired,))[0], g.min_size) for g in members)
            short = want - sum(per_group.get(g.name, 0) for g in members)
            roomy = [
                g
                for g in members
                if g.az not in outages and g.desired < math.floor(base.get(g.name, (0, g.max_size))[1] * factor)
            ]
            degraded = any(g.az in outages for g in members) and bool(roomy)
            if short > 0 and degraded:
                since = self._short.setdefault(pool, self.t)
                if self.t - since > self.bounds.shortfall:
                    self.fail(
                        "8 every shortfall covered within a bound",
                        f"pool {pool} short {short} of {want} since t={since:.0f} while a sibling AZ is healthy",
                    )
            else:
                self._short.pop(pool, None)

    def finish(self) -> None:
        """End of run (after a quiet tail): sizes back where they were, nothing detached running, no cordon of ours
        on a surviving instance without a command, every command reachable through its pointers."""
        self.scan()
        base, busy = self.view.baseline(), self.busy_groups()
        excused = self.view.restore_excused()  # originals of ours, also accepted (``sim.actors._kops_spec``); one
        for g in self.view.group_states():  # under desired capacity ends at it (resize 330090); a desired capacity
            if (want := base.get(g.name)) is None or g.name in busy:  # other tools' decrements explain is kept too
                continue
            if not self.foreign.accepts(g.name, g.desired, want[0], g.min_size) or (
                g.max_size != want[1] and g.max_size not in {max(v, g.desired) for v in excused.get(g.name, ())}
            ):
                self.fail(
                    "4 sizes end where they were",
                    f"{g.name} ends at desired {g.desired} MaxSize {g.max_size}, was {want[0]}/{want[1]}"
                    f"{f' ({n} taken away by another tool)' if (n := self.foreign.decrements.get(g.name)) else ''}",
                )
        detached = sorted(i for i, (group, _az) in self.view.running_instances().items() if group is None and not busy)
        if detached:
            self.fail("4 nothing detached left running", f"{len(detached)} instances outside any group: {detached[:5]}")
        if unreachable := unreachable_command(self.view):
            self.fail("commands reachable through their pointers", unreachable)

    def busy_groups(self) -> set[str]:
        """The groups an active refresh run still surges or names (the run is judged by its liveness)."""
        busy: set[str] = set()  # (``sim.health.nodeless_left`` leaves them alone too)
        for item in self.view.table_prefix("RUN#"):
            if item.get("status") in ACTIVE_RUN:
                busy.update(str(g.get("name")) for g in item.get("groups") or [] if isinstance(g, dict))
                busy.update(str(name) for name in item.get("surge") or {})
        return busy


def view_epoch(t: float) -> float:
    """The epoch seconds of simulated second ``t`` (``sim.kernel.EPOCH``)."""
    return EPOCH.timestamp() + t


def _instance_ids(call: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Iterable[str]:
    if call == "ec2.terminate":
        return [str(i) for i in (args[0] if args else kwargs.get("instance_ids", ()))]
    if call == "autoscaling.complete_lifecycle_action":
        action = args[0] if args else kwargs.get("action")
        return [action.instance_id] if isinstance(action, LifecycleAction) else []
    return [str(args[0] if args else kwargs.get("instance_id"))]
