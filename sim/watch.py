"""More of the design's safety invariants, watched as they happen (issue 12): the lease lock's exclusion, a drained
node cordoned at once (not when its drain gets a slot) and a drain stopped at its deadline; and a refresh's waits
ending by their deadlines.

- **The lock** (docs/DESIGN.md, "one writer at a time"; DynamoDB Developer Guide, "Condition expressions": a
  conditional ``PutItem`` is atomic): every write of the ``LOCK`` item is seen as the table applies it (the
  ``MemoryDynamo.listeners`` hook). A new holder may take the lock only over a free or expired lease, and its fencing
  token must be higher than every token handed out before: two holders with one token means two invocations both
  believed they held the lock.
- **Cordon at once** (agent/consumer/steps.py ``cordon_first``; Kubernetes documentation "Safely Drain a Node":
  cordon first so evicted pods are not scheduled back onto the node): a drain command the agent has started
  (``status`` ``running``) has its node unschedulable within ``cordon_seconds``, while the Kubernetes API had no
  injected fault since the command started (a refused cordon is retried by the drain step only) and the agent is up,
  **until the drain's end** (``_Drain.cordon_until``: its deadline, tightened, capped at ``MAX_COMMAND_SECONDS`` after
  its start, ``decisions.capped``; over from that instant on, to the microsecond, ``drain_over``). Past it the
  drain is over whatever its ``CMD#`` item still reads (an end the table refused to record, a message dead-lettered
  meanwhile), and the node may be uncordoned: the drain's own
  ``uncordon_on_failure``, or the refresher undoing a step whose drain timed out (docs/DESIGN.md). A node an
  operator uncordoned after the drain started (``World.operator_uncordoned``; the node was theirs, cordoned before
  the drain, which a drain leaves theirs: ``agent.drain.cordon``) is not counted: the drain goes on and evicts what
  lands there meanwhile (``DrainProgress.arrival``), but does not cordon it again (seed 5075 of the
  ``lock_not_atomic`` profile). A node that registers after its drain started (an instance warned before its kubelet
  joined: ``steps.NodeWait``) has ``cordon_seconds`` from its registration. A drain whose agent life died (a crash
  hands nothing back: its ``CMD#`` item names a ``worker`` that is not the agent's now) waits for another life to
  take it over, once its heartbeat is ``stale_after_seconds`` old and the command is received again
  (``TAKEOVER_SLACK`` past when the sweep may re-send it, plus the replenisher's crash windows since): a node not
  cordoned by then (it registered after that life died) is judged from there (resize seed 350004). Only a node never
  seen cordoned under that drain waits so: one seen cordoned (at any look while the drain ran, whichever life held
  it) and schedulable again was uncordoned by something, and is judged at once.
- **A drain stops at its deadline** (the other side; ``agent.drain``: a drain evicts until its deadline, then
  concludes; ``steps.execute``: a drain whose deadline passed evicts nothing): every eviction or DELETE of a pod the
  Kubernetes API accepts (``SimKube.stops``) is on the node of a drain the agent started (``running`` in its
  ``CMD#`` item) and no later than that drain's deadline (``_Drain.stop_by``, the command's deadline: a tightened one
  reaches the running drain only at its next heartbeat).
- **A DELETE past a budget only as an ending instance's deadline nears** (``DRAIN_PDB_DEADLINE_POLICY=delete``,
  ``core.settings.base.PdbDeadlinePolicy``; ``agent.drain.policy.seconds_until_pdb_delete``): a running workload pod
  the API deletes (``stopped_by_delete``: not an eviction) is on the instance of a deadline-bound drain (a Spot
  warning's or a termination lifecycle action's, ``agent.drain.policy.DEADLINE_BOUND_REASONS``, or one whose deadline
  an interruption tightened), under the ``delete`` policy, after a PodDisruptionBudget refused its eviction
  (``PodInfo.refused_by_budget``), and no earlier than its grace stopped fitting before the drain's earliest deadline
  less ``DRAIN_GRACE_MARGIN_SECONDS`` (the deadline less the margin, its grace and a second). A refresh, rebalance or
  replenish drain never deletes one: its instance need not go, so budgets are honoured to the end.

- **Compensations end**: a ``COMP#`` ledger whose failed group has been whole for ``comp_bound`` still carrying a
  compensation is stuck (its give-back refused again and again, or never decided).
- **Refresh waits end** (docs/DESIGN.md: every wait of a run has a deadline, ``core.runs.WaitDeadline``): no step
  of an active run has been in one wait longer than its deadline plus six refresher ticks, not counting the time
  the refresher spent in a crash or timeout window (``EventBus.crashes``): no pass of it could judge the deadline
  then, and a window may be as long as the slack (storm seed 240125).

``install(world)`` wires these checks into a built ``sim.world.World`` (its checker raises the ``Violation``);
``sim.run.run_seed`` does it for every run unless told not to (``watch=False``), so ``python -m sim run`` and the tests
judge the same invariants.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from agent.drain.policy import DEADLINE_BOUND_REASONS
from core.runs import WaitDeadline
from core.settings import PdbDeadlinePolicy
from sim.invariants import ACTIVE_RUN, EARLY, view_epoch
from sim.kernel import Step, seconds_of
from sim.kube_model import DEFAULT_GRACE, PodInfo

if TYPE_CHECKING:
    from sim.world import World

LOCK = "LOCK"
TIME_RESOLUTION = 1e-6  # seconds: the agent's datetimes and the items' ISO times are to the microsecond
# seconds past a dead life's stale heartbeat for another life to hold the command: its message comes back a second
# after (``decisions.on_refusal``) or, dead-lettered meanwhile (received ``maxReceiveCount`` times, the dead life's
# receives among them), the replenisher's sweep sends it again at its next tick (120 s, ``lambdas.common.sweep``);
# then a long poll (20 s) and the cordon. Counted from when the sweep may re-send it (no sooner than
# ``COMMAND_SWEEP_SECONDS``, 300 s, after its last re-send: ``resent_at``), plus the replenisher's crash windows since
TAKEOVER_SLACK = 180.0
RETAKE_SLACK = 60.0  # seconds past the sweep's re-send of it for another life to start it (a long poll, the cordon)


class _Drain(NamedTuple):
    """A started drain as its ``CMD#`` item tells it (simulated seconds)."""

    instance: str
    since: float  # started_at
    cordon_until: float  # the earliest its deadline can be: tightened, capped MAX_COMMAND_SECONDS after the start
    stop_by: float  # the latest it may evict: the command's own deadline (tightening and the cap only move it earlier)
    bound: bool  # its instance ends whatever the drain does (a Spot warning, a lifecycle action, a tightened deadline)
    grace: int | None  # the command's override of each pod's terminationGracePeriodSeconds (None: the pod's own)


def drain_of(item: dict[str, Any], max_command_seconds: float | None) -> _Drain | None:
    """The started drain a ``running`` ``CMD#`` drain item describes (None without a start or a deadline)."""
    command = item.get("command")
    deadline = command.get("deadline") if isinstance(command, dict) else None
    if not isinstance(command, dict) or not item.get("started_at") or deadline is None:
        return None
    since = _seconds(item["started_at"])
    stop_by = _seconds(deadline)
    until = min(stop_by, _seconds(item["deadline_tightened_to"])) if item.get("deadline_tightened_to") else stop_by
    if max_command_seconds is not None:
        until = min(until, since + max_command_seconds)
    bound = str(command.get("reason", "")).startswith(DEADLINE_BOUND_REASONS) or bool(item.get("deadline_tightened_to"))
    options = command.get("options")
    grace = options.get("grace_period_seconds") if isinstance(options, dict) else None
    return _Drain(str(item.get("instance_id")), since, until, stop_by, bound, None if grace is None else int(grace))


def drain_over(drain: _Drain, t: float) -> bool:
    """Whether ``drain`` is over at simulated second ``t``: from its deadline (``cordon_until``) on, to the microsecond,
    as the agent judges it. The agent's clock and the ``CMD#`` times are datetimes (microseconds): at the kernel's
    instant of the deadline it reads no second left (``decisions.deadline_passed``, ``<= 0``), ``SimDrain`` concludes,
    and a refresh drain's ``uncordon_on_failure`` gives its cordon back. The kernel's float time of that instant can
    lie below the deadline read back from its ISO string (storm seed 281013: 18,911.0793316 s against 18,911.0793321
    s); judged still inside the drain, the uncordon was blamed on it whenever the table refused the drain's end write
    (a DynamoDB outage). Every instant a microsecond or more before the deadline is still checked, so a cordon missed
    or undone while the drain runs is still caught."""
    return t >= drain.cordon_until - TIME_RESOLUTION


def _seconds(value: Any) -> float:
    """Simulated seconds of an ISO 8601 time (or epoch seconds) read from an item."""
    try:
        return seconds_of(str(value))
    except ValueError:
        return float(value) - view_epoch(0.0)


@dataclass
class Watch:
    """The checks of the module docstring on one world."""

    world: World
    cordon_seconds: float = 10.0
    every: float = 5.0  # seconds between two looks at the drains (the refresh waits: the checker's scan cadence)
    wait_slack: float = 1800.0  # six refresher ticks lost to throttling or errors; its crash windows not counted
    comp_bound: float = 3 * 3600.0  # a compensation given back after its group is whole (REPLENISH hold + give-back)
    _tokens: dict[int, str] = field(default_factory=dict)  # fencing token -> the holder it was given to
    _last: float = -1e18
    _last_cordons: float = -1e18
    stop_slack: float = 1.0  # an eviction sent at its drain's deadline, to the float
    _drains: dict[str, _Drain] = field(default_factory=dict)  # CMD# sk -> the drain, while it may still run
    _stop_by: dict[str, float] = field(default_factory=dict)  # instance -> the latest deadline of a drain started
    # instance -> the earliest deadline of its deadline-bound drains, and their grace overrides (``_bound``)
    _ending: dict[str, float] = field(default_factory=dict)
    _overrides: dict[str, set[int | None]] = field(default_factory=dict)
    _cordoned: set[tuple[str, str]] = field(default_factory=set)  # (CMD# sk, node) seen cordoned while it ran

    def on_write(
        self, table: str, key: tuple[str, str], old: dict[str, Any] | None, new: dict[str, Any] | None
    ) -> None:
        """``MemoryDynamo`` listener: a write of the lock item, or of a command (the drains under way)."""
        if key[1].startswith("CMD#"):
            if new is not None and new.get("status") == "running" and new.get("kind") == "drain":
                drain = drain_of(new, getattr(getattr(self.world.agent, "settings", None), "max_command_seconds", None))
                if drain is not None:
                    self._drains[key[1]] = drain
                    self._stop_by[drain.instance] = max(drain.stop_by, self._stop_by.get(drain.instance, drain.stop_by))
                    if drain.bound:
                        self._bound(drain)
            else:
                self._forget(key[1])
            return
        if key[1] != LOCK or new is None or not new.get("holder"):
            return
        holder = str(new["holder"])
        token = int(new.get("fencing") or 0)
        checker = self.world.checker
        checker.t = self.world.kernel.t
        taken_over = old is not None and old.get("holder") and str(old["holder"]) != holder
        if taken_over and old is not None and float(old.get("lease_expires_at") or 0) > view_epoch(checker.t):
            checker.fail(
                "8 one lock holder at a time",
                f"{holder} took the lock over {old['holder']}'s lease valid until {old['lease_expires_at']}",
            )
        given = self._tokens.get(token)
        if given is not None and given != holder:
            checker.fail("8 one lock holder at a time", f"fencing token {token} given to {given} and to {holder}")
        if given is None and self._tokens and token <= max(self._tokens):
            checker.fail("8 one lock holder at a time", f"fencing token {token} given after {max(self._tokens)}")
        self._tokens[token] = holder

    def after_step(self, step: Step) -> float:
        """The cordon checks every ``every`` seconds, the waits' at the checker's scan cadence; answers when the next
        may be due (``Checker.after_step``)."""
        scan = self.world.checker.bounds.scan_seconds
        if step.at - self._last_cordons >= self.every:
            self._last_cordons = step.at
            self.cordons()
        if step.at - self._last >= scan:
            self._last = step.at
            self.waits()
        return min(self._last_cordons + self.every, self._last + scan) - EARLY

    def waits(self) -> None:
        """No wait of an active refresh run outlives its deadline (``RefresherSettings.deadline_seconds``) by more
        than ``wait_slack`` (six refresher ticks), no compensation outlives ``comp_bound`` (``_late``).

        Reads the ``COMP#`` and ``RUN#`` ranges of the cluster partition only (not its ``DETACH#`` items, most of it
        after a week); when one is late (or cannot be read), the partition is walked in its order, as it was: the
        first late item is the one named."""
        world = self.world
        now = view_epoch(world.kernel.t)
        view = world.view
        try:
            if not any(self._late(item, now) for prefix in ("COMP#", "RUN#") for item in view.table_prefix(prefix)):
                return
        except Exception:  # noqa: BLE001  # an item the checks cannot read: the walk meets it where it did
            pass
        for item in view.cluster_items():  # COMP# and RUN# are kinds of the cluster partition
            late = self._late(item, now)
            if late is not None:
                world.checker.t = world.kernel.t
                world.checker.fail(*late)

    def _late(self, item: dict[str, Any], now: float) -> tuple[str, str] | None:
        """(invariant, detail) when ``item`` is a compensation or an active run's wait past its bound."""
        sk = str(item.get("sk", ""))
        if sk.startswith("COMP#"):
            return self._compensation(item, now)
        if not sk.startswith("RUN#") or item.get("status") not in ACTIVE_RUN:
            return None
        settings = self.world.lambdas.refresher_settings
        for step in item.get("steps") or []:
            for wait, since in sorted((step.get("waiting_since") or {}).items()):
                try:
                    limit = settings.deadline_seconds(WaitDeadline(wait))
                except ValueError:
                    continue
                began = datetime.fromisoformat(str(since)).timestamp()
                waited = now - began
                if waited - self._refresher_down(began, now) > limit + self.wait_slack:
                    return (
                        "8 no refresh wait past its deadline",
                        f"{item.get('sk')} step {step.get('index')} in {wait} for {waited:.0f} s (deadline {limit} s)",
                    )
        return None

    def _refresher_down(self, began: float, now: float, function: str = "refresher") -> float:
        """Seconds of ``[began, now]`` (epoch) inside a crash or timeout window of ``function``, overlaps merged."""
        epoch = view_epoch(0.0)
        spans = sorted((s + epoch, e + epoch) for s, e, name, _, _ in self.world.bus.crashes if name == function)
        down, reached = 0.0, began
        for start, end in spans:
            start, end = max(start, reached), min(end, now)
            if end > start:
                down += end - start
                reached = end
        return down

    def cordons(self) -> None:
        """Every started drain's node cordoned within ``cordon_seconds`` (see the module docstring)."""
        if not self._drains:  # most looks: no drain under way, nothing to check
            return
        world = self.world
        t = world.kernel.t
        started: dict[str, tuple[float, str, bool]] = {}  # instance -> (since, sk, judged now)
        for sk, drain in list(self._drains.items()):
            if drain_over(drain, t):  # over (its end maybe never recorded): no longer this check's
                self._forget(sk)
            elif (judged := t - drain.since > self.cordon_seconds) or drain.instance not in started:
                started[drain.instance] = (drain.since, sk, judged)  # a younger one: only its cordon noted
        if not started:
            return
        view = world.view
        for node in view.nodes_of(started.keys()):  # only the drains' nodes, in the nodes' order
            entry = started.get(node.instance_id)
            if entry is None or not node.ready or not view.running(node.instance_id):
                continue
            since_or_none, sk, judged = entry
            if node.unschedulable:
                self._cordoned.add((sk, node.name))  # a dead life's wait excuses no node seen cordoned under sk
                continue
            if not judged or ((sk, node.name) not in self._cordoned and self._taken_over_later(sk, t)):
                continue
            if self._excused(since_or_none, t) or world.operator_uncordoned.get(node.name, -1.0) >= since_or_none:
                continue  # an operator's uncordon after the drain started: theirs, not a cordon the drain missed
            joined = _seconds(world.kube.nodes[node.name]["metadata"]["creationTimestamp"])
            if t - joined <= self.cordon_seconds:
                continue  # registered after the drain started (a warned instance's late node): cordoned once seen
            world.checker.t = t
            world.checker.fail(
                "5 a drained node is cordoned at once",
                f"node {node.name} ({node.instance_id}) still schedulable {t - since_or_none:.0f} s after the agent "
                "started its drain",
            )

    def _bound(self, drain: _Drain) -> None:
        """Remember a deadline-bound drain of ``drain.instance``: the earliest deadline any of them had, and each
        one's grace override (the most any of them allows a DELETE's timing)."""
        instance = drain.instance
        self._ending[instance] = min(drain.cordon_until, self._ending.get(instance, drain.cordon_until))
        self._overrides.setdefault(instance, set()).add(drain.grace)

    def stopped(self, node: str, verb: str, pod: PodInfo) -> None:
        """``SimKube.stops`` observer: a pod on ``node`` evicted or deleted now, by a drain still within its deadline,
        and deleted past its budget only as the module docstring says."""
        t = self.world.kernel.t
        instance = self.world.kube.node_instance.get(node, "")
        stop_by = self._stop_by.get(instance)
        if stop_by is None or t > stop_by + self.stop_slack:
            self.world.checker.t = t
            self.world.checker.fail(
                "5 a drain stops at its deadline",
                f"a pod on node {node} ({instance or 'no instance'}) stopped by {verb} at t={t:.1f} s, "
                + ("no drain of it started" if stop_by is None else f"{t - stop_by:.0f} s after its drain's deadline"),
            )
        if verb == "delete" and pod.workload and not pod.terminating and pod.obj["status"].get("phase") == "Running":
            why = self._not_past_budget(instance, pod, t)
            if why is not None:
                self.world.checker.t = t
                self.world.checker.fail(
                    "5 a pod is deleted past its budget only as its instance's deadline nears",
                    f"pod {pod.key} on node {node} ({instance or 'no instance'}) deleted at t={t:.1f} s: {why}",
                )

    def _not_past_budget(self, instance: str, pod: PodInfo, t: float) -> str | None:
        """Why the DELETE of running workload ``pod`` on ``instance`` at ``t`` is not one the policy allows; None
        when it is (module docstring)."""
        settings = getattr(self.world.agent, "settings", None)
        policy = getattr(settings, "drain_pdb_deadline_policy", None)
        if policy != PdbDeadlinePolicy.DELETE:
            return f"DRAIN_PDB_DEADLINE_POLICY is {getattr(policy, 'value', policy)}"
        deadline = self._ending.get(instance)
        if deadline is None:
            return "no deadline-bound drain of its instance started (such a drain honours budgets to its end)"
        if not pod.refused_by_budget:
            return "no PodDisruptionBudget ever refused its eviction"
        grace = pod.obj["spec"].get("terminationGracePeriodSeconds")
        own = DEFAULT_GRACE if grace is None else max(0, int(grace))
        wanted = max(own if override is None else override for override in self._overrides.get(instance, {None}))
        due = deadline - float(getattr(settings, "drain_grace_margin_seconds", 0.0)) - wanted - 1
        if t < due - self.stop_slack:
            return f"{due - t:.0f} s before its grace of {wanted} s stopped fitting before the drain's deadline"
        return None

    def _compensation(self, item: dict[str, Any], now: float) -> tuple[str, str] | None:
        """A compensation whose failed group has been whole (``healthy_since``) for ``comp_bound`` seconds is given
        back by then (docs/DESIGN.md: every capacity increase undone exactly once, within a bound)."""
        comp = item.get("compensation")
        healthy = comp.get("healthy_since") if isinstance(comp, dict) else None
        if not healthy:
            return None
        since = datetime.fromisoformat(str(healthy)).timestamp()
        if now - since > self.comp_bound:
            return (
                "8 no compensation stuck past its bound",
                f"{item.get('sk')}: its group whole for {now - since:.0f} s and the compensation not given back",
            )
        return None

    def _forget(self, sk: str) -> None:
        """Drain ``sk`` no longer runs: neither it nor its cordons seen are this check's."""
        if self._drains.pop(sk, None) is not None:
            self._cordoned = {seen for seen in self._cordoned if seen[0] != sk}

    def _taken_over_later(self, sk: str, t: float) -> bool:
        """Whether drain ``sk`` belongs to an agent life that died (its ``worker`` not the agent's now) and is not
        yet due to be taken over by another (module docstring, "Cordon at once")."""
        item = self.world.view.table_item(sk)
        if item is None or str(item.get("worker", "")) == str(getattr(self.world.agent, "worker_id", "")):
            return False
        stale = float(item.get("heartbeat_at") or 0) + float(item.get("stale_after_seconds") or 0)  # epoch
        resent = _seconds(item["resent_at"]) + view_epoch(0.0) if item.get("resent_at") else -1e18
        if item.get("started_at") and resent <= _seconds(item["started_at"]) + view_epoch(0.0):
            resent = -1e18  # a re-send the dead life's start took holds the sweep back no more (``stranded``)
        sweep = self.world.lambdas.replenisher_settings.command_sweep_seconds  # a re-send before the stale heartbeat
        first = max(stale, resent + sweep) if resent < stale else stale  # holds the sweep's next one back that long
        now = view_epoch(t)  # then each of its ticks lost to a crash of the replenisher; a re-send since (its retake)
        due = first + TAKEOVER_SLACK + self._refresher_down(first, now, "replenisher")
        return now <= (max(due, resent + RETAKE_SLACK) if resent >= stale else due)  # is received and started at once

    def _excused(self, since: float, t: float) -> bool:
        """A Kubernetes API fault window since the drain started (the cordon may have been refused), or the agent
        down or not leading."""
        for w in self.world.faults.windows:
            if w.service == "kube" and w.start < t and w.end > since:
                return True
        agent: Any = self.world.agent
        return not getattr(agent, "alive", True) or not getattr(agent, "leading", True)


def install(world: World) -> Watch:
    """Wire a ``Watch`` into ``world`` (before it runs)."""
    watch = Watch(world)
    world.dynamo.listeners.append(watch.on_write)
    world.kube.stops.append(watch.stopped)
    checker_step = world.checker.after_step

    def after_step(step: Step) -> float | None:
        due = checker_step(step)
        wake = watch.after_step(step)
        return None if due is None else min(due, wake)

    world.checker.after_step = after_step  # type: ignore[method-assign]  # the world calls the checker's hook
    return watch
