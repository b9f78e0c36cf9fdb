"""A scenario's chart from what its recorder saw: a fake world's groups and nodes sampled at chosen seconds, the
drain commands placed from their records; and ``--chart`` refused in one line, before any world starts, without
matplotlib."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from charts.model import Phase
from scenarios.__main__ import main
from scenarios.fleetchart import FleetRecorder
from scenarios.timeline import Timeline

MASTERS, NODES = "master-a.masters.c", "nodes-a.c"


def node(iid: str, ready: bool = True, cordoned: bool = False) -> dict[str, Any]:
    return {
        "metadata": {"name": f"n-{iid}"},
        "spec": {"providerID": f"aws:///us-east-1a/{iid}", "unschedulable": cordoned},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


class FakeWorld:
    """What the recorder reads of ``LocalWorld``: the cluster's names, the simulator's nodes, Auto Scaling."""

    def __init__(self) -> None:
        self.cluster = SimpleNamespace(name="c", master_asgs={"a": MASTERS}, worker_asgs={"a": NODES}, table_name="t")
        self.members: dict[str, list[str]] = {MASTERS: [], NODES: []}
        self.nodes: list[dict[str, Any]] = []
        self.simulator = SimpleNamespace(nodes=lambda: list(self.nodes))

    def client(self, service: str) -> Any:
        assert service == "autoscaling"

        def describe(AutoScalingGroupNames: list[str]) -> dict[str, Any]:
            return {
                "AutoScalingGroups": [
                    {"AutoScalingGroupName": g, "Instances": [{"InstanceId": i} for i in self.members[g]]}
                    for g in AutoScalingGroupNames
                ]
            }

        return SimpleNamespace(describe_auto_scaling_groups=describe)


class Recorder(FleetRecorder):
    drained: dict[str, list[tuple[float, float | None, str]]] = {"i-1": [(2.5, 3.5, "succeeded")]}  # noqa: RUF012

    def drains(self) -> dict[str, list[tuple[float, float | None, str]]]:  # the CMD# items (a table in the world)
        return self.drained


def test_a_replacement_seen_gives_each_instance_its_phases_and_each_group_its_ready_nodes() -> None:
    world = FakeWorld()
    recorder = Recorder(world, Timeline())  # type: ignore[arg-type]
    world.members = {MASTERS: ["i-m"], NODES: ["i-1"]}
    world.nodes = [node("i-m"), node("i-1")]
    recorder.sample(at=0)
    world.members[NODES] = ["i-1", "i-2"]  # the spare launched, no node yet
    recorder.sample(at=1)
    world.nodes = [node("i-m"), node("i-1"), node("i-2")]  # the spare Ready
    recorder.sample(at=2)
    world.nodes = [node("i-m"), node("i-1", cordoned=True), node("i-2")]  # its drain (2.5 to 3.5) cordoned it
    recorder.sample(at=3.75)  # a fast drain: over before a sample saw its cordon
    world.members[NODES] = ["i-2"]
    world.nodes = [node("i-m"), node("i-2")]
    recorder.sample(at=4)

    recorder.timeline.mark("lambda", "the system under test acts", at=recorder.timeline.start + 3.5)
    chart = recorder.chart("t", end=5)

    assert (chart.start, chart.end) == (1.5, 5)  # from shortly before the system acted (LEAD_SECONDS)

    rows = {r.instance_id: r for r in chart.rows}
    assert [r.instance_id for r in chart.rows] == ["i-m", "i-1", "i-2"]  # by group, then first seen
    assert [(s.phase, s.start, s.end) for s in rows["i-1"].spans] == [
        (Phase.READY, 0, 2.5),
        (Phase.DRAIN, 2.5, 3.5),  # the cordon seen after the drain began is the drain's
        (Phase.DRAINED, 3.5, 4),
    ]
    assert [(s.phase, s.start, s.end) for s in rows["i-2"].spans] == [(Phase.LAUNCH, 1, 2), (Phase.READY, 2, 5)]
    assert [(m.what, m.at) for m in rows["i-1"].markers] == [("cordoned", 3.75), ("left group", 4)]
    assert [(m.what, m.at) for m in rows["i-2"].markers] == [("Ready", 2)]
    points = {p.pool: p.points for p in chart.pools}
    assert points == {"master-a.masters": [(0, 1)], "nodes-a": [(0, 1), (2, 2), (4, 1)]}


def test_a_chart_without_matplotlib_stops_before_the_world_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    monkeypatch.setattr("scenarios.__main__.LocalWorld", None)  # a world would fail to be made: none is
    assert main(["spot-interruption", "--chart", str(tmp_path / "x.svg")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "aws-node-manager[charts]" in err[0] and not (tmp_path / "x.svg").exists()
