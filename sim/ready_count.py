"""Invariant 1's count, "Ready workers never below the start during a refresh" (``sim.invariants.Checker.scan``).

A run's loss is the nodes of its start whose instance the refresher terminated and that are not Ready now; its gain,
the Ready worker nodes now that were not at its start. A node a fault holds NotReady counts as Ready (``sim.health``:
not the refresh's doing), but one held NotReady at the run's start is no Ready capacity of that start (docs/DESIGN.md,
invariant 1, counts Ready nodes): it is never the run's loss, nor its gain when it answers again (storm seed 195023: a
spare a fault held NotReady, given back by a paused run, went under the next run). The loss may not pass the gain,
but for what is not the refresh's doing:

- the units kOps' writes clamped away since the run started (``World.kops_taken``: Auto Scaling scaled in an
  instance of its choosing);
- a node that came during the run, was counted Ready at a scan, and that a Spot reclaim then took (seed 171003: two
  spares of finished steps reclaimed while the last step drained), until a node comes in its group after the reclaim
  (Auto Scaling's replacement, counted in the gain then: a node of the start reclaimed is in neither count, and its
  replacement is counted in the gain). Not when the refresher terminated an instance between the reclaim's warning
  and the reclaim: it may have counted the doomed node as capacity then, so the loss stays its own (seed 123033, whose
  bug this still finds: there the replacement of step 0's reclaimed spare, warned before it launched, was the node
  step 1 counted). A node another tool terminated (``sim.foreign``) is counted as one Spot reclaimed without a
  warning: its window is the instant it went; with a decrement no replacement comes, so it stays excused until a node
  the product brings in its group stands for it.

The world tells it of each reclaim as the instance goes (``World._instance_gone``), ``sim.foreign`` of each foreign
termination, and the checker of each terminate of the refresher (``Checker.refresher_terminated``).
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field

SAME_SECOND = 1e-6  # a terminate at the reclaim's warning or its end is within its window (float rounding aside)


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

    def spot_reclaimed(self, instance_id: str, warned: float, gone: float) -> None:
        """A Spot reclaim announced at ``warned`` took ``instance_id`` at ``gone`` (simulated seconds)."""
        self.reclaimed[instance_id] = (warned, gone)

    def foreign_terminated(self, instance_id: str, t: float) -> None:
        """Another tool terminated ``instance_id`` at ``t`` (``sim.foreign``): a reclaim without a warning."""
        self.reclaimed[instance_id] = (t, t)

    def refresher_terminated(self, t: float) -> None:
        """The refresher terminated an instance (or completed its lifecycle action) at ``t``."""
        self.terminations.append(t)

    def started(self, run_id: str, ready_now: frozenset[str], unwell: frozenset[str] = frozenset()) -> frozenset[str]:
        """The Ready workers at ``run_id``'s start that it may lose only for a gain: ``ready_now`` when it is first
        seen, less ``unwell`` then (the nodes a fault holds NotReady, counted in ``ready_now``: module docstring)."""
        kept = self.kept.get(run_id)
        if kept is None:
            kept = self.kept[run_id] = self.start.setdefault(run_id, ready_now) - unwell
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
    ) -> str:
        """What breaks invariant 1 for ``run_id`` at ``t`` ("" when it holds): ``lost`` nodes of its start the
        refresher replaced are gone, ``taken`` the kOps clamps' count now, ``instance_of`` the listed nodes' instances,
        ``running`` the running instances' groups."""
        gained = ready_now - self.start[run_id]
        came = self.came.setdefault(run_id, {})
        for name in gained - came.keys():
            instance = instance_of.get(name, "")
            came[name] = (instance, running.get(instance, (None, ""))[0], t)
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
            if name not in ready_now and self._spot_took(instance):
                events.append((self.reclaimed[instance][1], False, group))
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
