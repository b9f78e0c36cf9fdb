"""Invariant 1's count, "Ready workers never below the start during a refresh" (``sim.invariants.Checker.scan``).

A run's loss is the nodes of its start whose instance the refresher terminated and that are not Ready now; its gain,
the Ready worker nodes now that were not at its start. A node a fault holds NotReady counts as Ready (``sim.health``:
not the refresh's doing), but one held NotReady at the run's start is no Ready capacity of that start (docs/DESIGN.md,
invariant 1, counts Ready nodes): it is never the run's loss, nor its gain when it answers again (storm seed 195023: a
spare a fault held NotReady, given back by a paused run, went under the next run). The loss may not pass the gain,
but for what is not the refresh's doing:

- the units kOps' writes clamped away since the run started (``World.kops_taken``: Auto Scaling scaled in an
  instance of its choosing);
- a node that came during the run, was counted Ready at a scan or stood for a termination of the refresher (Ready
  then, maybe only between two scans: resize seed 360376), and that a Spot reclaim then took (seed 171003: two
  spares of finished steps reclaimed while the last step drained), until a node comes in its group after the reclaim
  (Auto Scaling's replacement, counted in the gain then: a node of the start reclaimed is in neither count, and its
  replacement is counted in the gain). Not when the refresher terminated an instance between the reclaim's warning
  and the reclaim: it may have counted the doomed node as capacity then, so the loss stays its own (seed 123033, whose
  bug this still finds: there the replacement of step 0's reclaimed spare, warned before it launched, was the node
  step 1 counted). A node another tool terminated (``sim.foreign``) is counted as one Spot reclaimed without a
  warning: its window is the instant it went; with a decrement no replacement comes, so it stays excused until a node
  the product brings in its group stands for it. A node comes when it registered (its ``creationTimestamp``), not when
  a scan first sees it Ready, and a reclaim counts from its warning (the answers to it start there; seed 123033's
  replacement registered between the two): a node registered before is no replacement of it (storm seed 240042: step
  6's spare, Ready before a foreign termination took step 3's, first seen at the scan 39 ms after it, ended the
  excuse).

A node a fault holds NotReady that came during the run counts in its gain only if the refresher did not rely on it
NotReady: the gain is judged at each of the refresher's terminations (and lifecycle completions) of a node of the
run's start, as a Lambda could see it then (``Moment``; a fault no Lambda could know yet, ``Unwell.unknown``, as
Ready). Each such termination in a group is stood for by one new node of that group Ready then (``credited``, the
earliest come first; a node of the run's start Ready is no gain); a credited node still counts when a fault makes it
NotReady later (not the refresh's doing). A new node of the group not credited that a fault holds NotReady, known,
at such a termination is ``doubted``: no gain of the run until it answers again (Ready since). So the refresher
terminating an old node while its spare is NotReady is its loss, whatever the fault (the gap the previous count left:
with the refresher's Ready check put out of action, storm seed 195023's shrunk schedule held).

A node of the start whose instance the refresher had terminated before the run was created (``going``: a spare an
earlier run gave back, Ready and cordoned in its termination lifecycle action's drain) is going away, no capacity of
that start (docs/DESIGN.md, invariant 1: a node whose instance is going away counts for nothing): neither its loss nor
its gain, as one held NotReady at its start (storm seed 270110: a master refresh started while the spare a cancelled
worker run had terminated 9 minutes before was still draining; the node went as the hook completed, and the master
run was charged with a worker it never touched). The run could not know it, nor did it act on it. Only until the run
terminates that instance itself (a terminate refused before, the node kept): then it is of the run's start again.

The world tells it of each reclaim as the instance goes (``World._instance_gone``), ``sim.foreign`` of each foreign
termination, and the checker of each terminate of the refresher (``Checker.refresher_terminated``, with the
``Moment`` ``moment`` reads).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sim.kernel import seconds_of

if TYPE_CHECKING:
    from sim.health import Unwell
    from sim.world_view import NodeState, WorldView

SAME_SECOND = 1e-6  # a terminate at the reclaim's warning or its end is within its window (float rounding aside)


@dataclass(frozen=True)
class Moment:
    """What a Lambda could see of a group when the refresher terminated an instance of it (``moment``): the
    instance's ``node``, its ``group``, the group's listed worker ``nodes``, those of them ``ready`` (Ready, or held
    NotReady by a fault no Lambda could know yet) and those a fault holds NotReady, known (``known``: -> since)."""

    node: str
    group: str
    nodes: frozenset[str]
    ready: frozenset[str]
    known: dict[str, float] = field(default_factory=dict)
    # of ``ready``, each node -> (its instance, when it registered): ``came`` for a node no scan saw Ready yet
    arrived: dict[str, tuple[str, float]] = field(default_factory=dict)


@dataclass
class ReadyCount:
    """Invariant 1's state for every run the checker saw active (module docstring)."""

    start: dict[str, frozenset[str]] = field(default_factory=dict)  # run id -> Ready workers first seen
    kept: dict[str, frozenset[str]] = field(default_factory=dict)  # run id -> of its start, none a fault held NotReady
    taken_at_start: dict[str, int] = field(default_factory=dict)  # run id -> ``WorldView.kops_taken`` first seen
    # run id -> the nodes Ready since its start that were not at it -> (instance, group, first seen Ready)
    came: dict[str, dict[str, tuple[str, str | None, float]]] = field(default_factory=dict)
    reclaimed: dict[str, tuple[float, float]] = field(default_factory=dict)  # instance -> (warned, gone): Spot took it
    terminations: list[float] = field(default_factory=list)  # when the refresher terminated an instance, in order
    # run id -> group -> how many nodes of its start there the refresher terminated (each instance once)
    owed: dict[str, dict[str, int]] = field(default_factory=dict)
    # run id -> group -> the new nodes standing for them (Ready at a termination: module docstring)
    credited: dict[str, dict[str, set[str]]] = field(default_factory=dict)
    # run id -> node -> since when a fault holds it NotReady: not credited, known NotReady at a termination
    doubted: dict[str, dict[str, float]] = field(default_factory=dict)
    terminated_at: dict[str, float] = field(default_factory=dict)  # instance -> the refresher's last terminate of it
    # run id -> nodes of its start whose instance the refresher had terminated before it was created (docstring)
    going: dict[str, set[str]] = field(default_factory=dict)

    def spot_reclaimed(self, instance_id: str, warned: float, gone: float) -> None:
        """A Spot reclaim announced at ``warned`` took ``instance_id`` at ``gone`` (simulated seconds)."""
        self.reclaimed[instance_id] = (warned, gone)

    def foreign_terminated(self, instance_id: str, t: float) -> None:
        """Another tool terminated ``instance_id`` at ``t`` (``sim.foreign``): a reclaim without a warning."""
        self.reclaimed[instance_id] = (t, t)

    def refresher_terminated(
        self, t: float, seen: Moment | None = None, first: bool = True, instance_id: str | None = None
    ) -> None:
        """The refresher terminated ``instance_id`` (or completed its lifecycle action) at ``t``, ``seen`` what a
        Lambda could see of its group then (None: no node, or in no group), ``first`` its first termination of it."""
        self.terminations.append(t)
        if instance_id is not None:
            self.terminated_at[instance_id] = t
        if seen is not None:
            for run_id, kept in list(self.kept.items()):
                if seen.node in (going := self.going.get(run_id, set())):  # the run terminates it: its own again
                    going.discard(seen.node)
                    self.kept[run_id] = kept | {seen.node}
                    self._judge(run_id, seen, True, t)
                elif seen.node in kept:
                    self._judge(run_id, seen, first, t)

    def _judge(self, run_id: str, seen: Moment, first: bool, t: float) -> None:
        """``seen``'s termination, of a node of ``run_id``'s start: credit as many new nodes Ready in its group as
        terminations there, doubt the new ones not credited a fault holds NotReady, known (module docstring)."""
        owed = self.owed.setdefault(run_id, {})
        if first:
            owed[seen.group] = owed.get(seen.group, 0) + 1
        credited = self.credited.setdefault(run_id, {}).setdefault(seen.group, set())
        credited &= seen.nodes  # a node gone stands for nothing (a Spot reclaim's replacement stands in)
        start, came = self.start[run_id], self.came.setdefault(run_id, {})
        if (room := owed.get(seen.group, 0) - len(credited)) > 0 and (fresh := seen.ready - start - credited):
            credited.update(sorted(fresh, key=lambda name: (came[name][2] if name in came else t, name))[:room])
        for name in credited - came.keys():  # Ready at a termination, between two scans: it came (seed 360376)
            if name in seen.arrived:
                instance, registered = seen.arrived[name]
                came[name] = (instance, seen.group, min(t, registered))
        doubted = self.doubted.setdefault(run_id, {})
        for name, since in seen.known.items():
            if name not in start and name not in credited:
                doubted[name] = since

    def counted(self, run_id: str, ready_now: frozenset[str], unwell: Unwell) -> frozenset[str]:
        """``ready_now`` (the Ready workers, and those a fault holds NotReady) less those ``run_id`` doubts: what its
        gain may hold."""
        doubted = self.doubted.get(run_id)
        if not doubted:
            return ready_now
        held = unwell.nodes
        for name in [n for n, since in doubted.items() if held.get(n, (None,))[0] != since]:
            del doubted[name]  # it answered (Ready since, or NotReady by another fault), or went
        return ready_now - doubted.keys()

    def started(
        self,
        run_id: str,
        ready_now: frozenset[str],
        unwell: frozenset[str] = frozenset(),
        instance_of: dict[str, str] | None = None,
        created: object = None,
    ) -> frozenset[str]:
        """The Ready workers at ``run_id``'s start that it may lose only for a gain: ``ready_now`` when it is first
        seen, less ``unwell`` then (the nodes a fault holds NotReady, counted in ``ready_now``) and less those whose
        instance (``instance_of``) the refresher terminated before ``created``, the run's ``created_at`` (``going``:
        module docstring; none when either is not given)."""
        kept = self.kept.get(run_id)
        if kept is None:
            kept = self.start.setdefault(run_id, ready_now) - unwell
            if instance_of is not None and isinstance(created, str) and created and self.terminated_at:
                before, at = seconds_of(created), self.terminated_at.get
                going = {n for n in kept if (when := at(instance_of.get(n, ""))) is not None and when < before}
                if going:
                    self.going[run_id], kept = going, kept - going
            self.kept[run_id] = kept
        return kept

    def short(
        self,
        run_id: str,
        ready_now: frozenset[str],
        instance_of: dict[str, str],
        running: dict[str, tuple[str | None, str]],
        t: float,
        lost: int,
        taken: int,
        nodes: Callable[[], Sequence[NodeState]] | None = None,
    ) -> str:
        """What breaks invariant 1 for ``run_id`` at ``t`` ("" when it holds): ``lost`` nodes of its start the
        refresher replaced are gone, ``taken`` the kOps clamps' count now, ``instance_of`` the listed nodes' instances,
        ``running`` the running instances' groups, ``nodes`` the listed nodes (read only when a new one is Ready: it
        came when it registered, if before ``t``; without them, at ``t``)."""
        gained = ready_now - self.start[run_id]
        came = self.came.setdefault(run_id, {})
        if new := gained - came.keys():
            registered = _registered(nodes, new) if nodes is not None else {}
            for name in sorted(new):
                instance = instance_of.get(name, "")
                came[name] = (instance, running.get(instance, (None, ""))[0], min(t, registered.get(name, t)))
        taken -= self.taken_at_start.setdefault(run_id, taken)
        if lost <= len(gained) + taken:
            return ""
        spot = self._spot(came, ready_now)
        if lost <= len(gained) + taken + spot:
            return ""
        return (
            f"run {run_id}: {lost} nodes it replaced are gone, {len(gained)} new Ready, "
            f"{taken} scaled in by kOps' sizes, {spot} new ones reclaimed by Spot not replaced yet"
        )

    def _spot(self, came: dict[str, tuple[str, str | None, float]], ready_now: frozenset[str]) -> int:
        """How many of ``came``, gone now, a Spot reclaim took that no later node of their group stands for."""
        events: list[tuple[float, bool, str | None]] = []  # (when, a node came, its group)
        for name, (instance, group, since) in came.items():
            events.append((since, True, group))
            if name not in ready_now and self._spot_took(instance):  # from its warning: the answers start there
                events.append((max(self.reclaimed[instance][0], since), False, group))
        owed: dict[str | None, int] = {}
        for _at, arrived, group in sorted(events, key=lambda e: e[:2]):  # a reclaim before a node seen at its time
            owed[group] = max(0, owed.get(group, 0) - 1) if arrived else owed.get(group, 0) + 1
        return sum(owed.values())

    def _spot_took(self, instance_id: str) -> bool:
        """Whether Spot took ``instance_id``, the refresher terminating nothing from the warning to the reclaim."""
        window = self.reclaimed.get(instance_id)
        if window is None:
            return False
        first = bisect_left(self.terminations, window[0] - SAME_SECOND)
        return first == len(self.terminations) or self.terminations[first] > window[1] + SAME_SECOND


def _registered(nodes: Callable[[], Sequence[NodeState]], names: frozenset[str]) -> dict[str, float]:
    """When each of ``names`` registered (its ``creationTimestamp``, simulated seconds; absent when it has none)."""
    return {n.name: seconds_of(n.created) for n in nodes() if n.name in names and n.created}


def _arrivals(view: WorldView, ready: set[str], t: float) -> dict[str, tuple[str, float]]:
    """Each of the ``ready`` nodes -> (its instance, when it registered; ``t`` when it has no ``creationTimestamp``)."""
    return {
        n.name: (n.instance_id, seconds_of(n.created) if n.created else t)
        for n in view.node_states()
        if n.name in ready
    }


def moment(view: WorldView, unwell: Unwell, instance_id: str, t: float) -> Moment | None:
    """What a Lambda could see at ``t`` of the group of ``instance_id``, which the refresher terminates (``Moment``):
    None when it is in no group or has no node. Walks the listed nodes once (a termination, not a scan)."""
    running = view.running_instances()
    group = running.get(instance_id, (None, ""))[0]
    if group is None:
        return None
    index = view.node_index()
    node, nodes = None, set()
    for name, instance in index.instance_of.items():
        if instance == instance_id:
            node = name
        if running.get(instance, (None, ""))[0] == group:
            nodes.add(name)
    if node is None:
        return None
    ready, known = nodes & index.ready_workers, {}
    arrived = _arrivals(view, ready, t)
    sick = [(name, since) for name, (since, master) in unwell.nodes.items() if not master and name in nodes]
    if sick:
        mark: dict[str, Any] | None = view.table_item("MEMBERSHIP")
        for name, since in sick:
            if unwell.unknown(name, t, mark):
                ready.add(name)
            else:
                known[name] = since
    return Moment(node, group, frozenset(nodes), frozenset(ready), known, arrived)
