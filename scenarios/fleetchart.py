"""What a scenario saw, as a chart (``python -m scenarios NAME --chart FILE``): a timeline per instance and the Ready
nodes per Auto Scaling group, on the scenario's own clock (seconds since its timeline began).

``FleetRecorder`` only reads, beside the system under test: every ``interval`` seconds the cluster's groups (moto's
DescribeAutoScalingGroups) and the nodes (the simulator's informer cache: Ready condition, ``spec.unschedulable``,
``spec.providerID`` for the instance); at the end, the drain commands' ``CMD#`` items (``started_at`` and
``finished_at``, written by the agent) place each drain where it happened. An instance's phase is:

- ``launch`` in a group, its node not Ready yet; ``ready`` Ready and schedulable; ``cordoned`` Ready, unschedulable;
- ``drain`` between its drain command's start and end; ``drained`` after a drain that succeeded;
- ``not_ready`` its node Ready once and not now (or gone while the instance is still in a group);
- nothing once it is neither in a group nor has a node (a detached instance draining keeps its row).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from adapters.dynamo.store import Store
from charts.model import Chart, InstanceRow, Marker, Phase, PoolSeries, sequence
from charts.render import write
from charts.runrecord import short_group
from localworld.world import LocalWorld
from scenarios.timeline import Timeline

Event = tuple[float, Phase | None]
# The chart starts this long before the timeline's first entry of a Lambda or of the fault the scenario plays (actors
# ``STARTERS``), or at the first sample when that is later: the world's set-up before it would squeeze what matters.
LEAD_SECONDS = 2.0
STARTERS = ("lambda", "refresher", "aws")


def _instance_of(node: Mapping[str, Any]) -> str | None:
    provider = str((node.get("spec") or {}).get("providerID") or "")
    return provider.rsplit("/", 1)[-1] if provider.startswith("aws://") else None


def _ready(node: Mapping[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


class FleetRecorder(threading.Thread):
    """Samples the world's cluster until ``stop``; ``chart`` turns what it saw into a ``charts.model.Chart``.

    Args:
        world: the started local world (the scenario sets its cluster up later: nothing is sampled before).
        timeline: the scenario's (its ``start`` is second 0; ``mono`` places the commands' wall-clock times).
        interval: seconds between samples.
    """

    def __init__(self, world: LocalWorld, timeline: Timeline, interval: float = 0.25) -> None:
        super().__init__(name="fleet-recorder", daemon=True)
        self.world, self.timeline, self.interval = world, timeline, interval
        self.halt = threading.Event()
        self.errors: list[str] = []
        self.events: dict[str, list[Event]] = {}  # instance id -> (seconds, phase entered), in time order
        self.markers: dict[str, list[Marker]] = {}
        self.groups: dict[str, str] = {}  # instance id -> the group it was last seen in
        self.pools: dict[str, list[tuple[float, int]]] = {}  # group -> (seconds, Ready nodes) when it changed
        self._was_ready: set[str] = set()
        self._cordoned: set[str] = set()
        self._autoscaling: Any = None
        self._first_sample: float | None = None

    def now(self) -> float:
        return round(time.monotonic() - self.timeline.start, 3)

    def run(self) -> None:
        while not self.halt.is_set():
            try:
                self.sample()
            except Exception as err:  # noqa: BLE001 - a watcher outlives a failed read (kept, reported with the chart)
                self.errors.append(f"{type(err).__name__}: {err}")
            self.halt.wait(self.interval)

    def stop(self) -> None:
        self.halt.set()
        self.join(5)

    def sample(self, at: float | None = None) -> None:
        """One look at the groups and nodes (``at``: the second to file it under, default now)."""
        info, simulator = self.world.cluster, self.world.simulator
        if info is None or simulator is None:
            return
        if self._autoscaling is None:
            self._autoscaling = self.world.client("autoscaling")
        names = sorted({*info.master_asgs.values(), *info.worker_asgs.values()})
        groups = self._autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=names)["AutoScalingGroups"]
        nodes = {iid: n for n in simulator.nodes() if (iid := _instance_of(n))}
        t = self.now() if at is None else at
        if self._first_sample is None:
            self._first_sample = t
        member = {str(i["InstanceId"]): str(g["AutoScalingGroupName"]) for g in groups for i in g["Instances"]}
        self.groups.update(member)
        for iid in sorted(set(member) | set(self.events)):
            self._observe(iid, t, iid in member, nodes.get(iid))
        for group in groups:
            name = str(group["AutoScalingGroupName"])
            ready = sum(1 for i in group["Instances"] if _ready(nodes.get(str(i["InstanceId"])) or {}))
            series = self.pools.setdefault(name, [])
            if not series or series[-1][1] != ready:
                series.append((t, ready))

    def _observe(self, iid: str, t: float, in_group: bool, node: Mapping[str, Any] | None) -> None:
        ready = node is not None and _ready(node)
        cordoned = node is not None and bool((node.get("spec") or {}).get("unschedulable"))
        phase: Phase | None
        if not in_group and node is None:
            phase = None
        elif not ready:
            phase = Phase.NOT_READY if iid in self._was_ready else Phase.LAUNCH
        else:
            phase = Phase.CORDONED if cordoned else Phase.READY
        events = self.events.setdefault(iid, [])
        markers = self.markers.setdefault(iid, [])
        if events and events[-1][1] is phase:
            return
        if not events and phase is None:
            return
        events.append((t, phase))
        if ready and iid not in self._was_ready:
            self._was_ready.add(iid)
            if (
                self._first_sample is not None and t > self._first_sample
            ):  # not for the instances Ready when the cluster was first seen
                markers.append(Marker("Ready", t))
        if cordoned and iid not in self._cordoned:
            self._cordoned.add(iid)
            markers.append(Marker("cordoned", t))
        if phase is None:
            markers.append(Marker("left group", t))

    def drains(self) -> dict[str, list[tuple[float, float | None, str]]]:
        """Instance id -> its drain commands as (start, end or None, status), on the timeline's clock (``CMD#``)."""
        info = self.world.cluster
        if info is None:
            return {}
        store = Store(self.world.resource("dynamodb").Table(info.table_name), info.name)
        out: dict[str, list[tuple[float, float | None, str]]] = {}
        for item in store.query_prefix("CMD#", consistent=True):
            command = item.get("command") or {}
            if command.get("kind") != "drain" or not item.get("started_at"):
                continue
            start = self._seconds(str(item["started_at"]))
            end = self._seconds(str(item["finished_at"])) if item.get("finished_at") else None
            out.setdefault(str(command.get("instance_id")), []).append((start, end, str(item.get("status", ""))))
        return out

    def _seconds(self, iso: str) -> float:
        return round(self.timeline.mono(datetime.fromisoformat(iso)) - self.timeline.start, 3)

    def chart(self, title: str, end: float | None = None) -> Chart:
        """What was seen, as a chart (rows by group, then first appearance; ``end``: the last second, default now;
        shown from ``LEAD_SECONDS`` before the timeline's first entry of one of the ``STARTERS``)."""
        end = self.now() if end is None else end
        drains = self.drains()
        cluster = self.world.cluster.name if self.world.cluster else ""
        rows = []
        for iid, events in self.events.items():
            windows = drains.get(iid, [])

            def drains_cordon(t: float, events: list[Event] = events, windows: list[Any] = windows) -> bool:
                """A cordon first seen after a drain began, the node not seen schedulable since: the drain's own
                (a drain of a few milliseconds is over before the next sample sees its cordon)."""
                began = [start for start, _, _ in windows if start <= t]
                return bool(began) and not any(p is Phase.READY and max(began) <= u < t for u, p in events)

            merged: list[tuple[float | None, Phase | None]] = [
                (t, p) for t, p in events if not (p is Phase.CORDONED and drains_cordon(t))
            ]
            for start, stop, status in windows:
                merged.append((start, Phase.DRAIN))
                if stop is not None:
                    merged.append((stop, Phase.DRAINED if status == "succeeded" else Phase.CORDONED))
            group = short_group(self.groups.get(iid, "?"), cluster)
            row = InstanceRow(
                iid, f"{iid} {group}", sequence(merged, end), sorted(self.markers.get(iid, []), key=lambda m: m.at)
            )
            rows.append((group, events[0][0], row))
        pools = [PoolSeries(short_group(name, cluster), points) for name, points in sorted(self.pools.items())]
        first_seen = min((events[0][0] for events in self.events.values()), default=0.0)
        acted = next((e.at for e in sorted(self.timeline.entries, key=lambda e: e.at) if e.actor in STARTERS), None)
        start = first_seen if acted is None else max(first_seen, acted - LEAD_SECONDS)
        note = (
            f"seen every {self.interval} s: the groups (Auto Scaling) and their nodes (Ready); drains from CMD# records"
        )
        if self.errors:
            note += f"; {len(self.errors)} failed reads, first: {self.errors[0]}"
        return Chart(
            title=title,
            rows=[row for _, _, row in sorted(rows, key=lambda r: (r[0], r[1]))],
            pools=pools,
            end=end,
            origin=datetime.fromtimestamp(self.timeline.wall_start, UTC),
            note=note,
            start=start,
        )


def write_chart(recorder: FleetRecorder, path: Path, title: str) -> Chart:
    """Stop ``recorder`` and draw what it saw into ``path`` (``charts.render.write``; its errors pass)."""
    recorder.stop()
    chart = recorder.chart(title)
    write(chart, path)
    return chart
