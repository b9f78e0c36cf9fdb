"""The picture written from a chart: one file, non-empty, with one group of bars per instance row and one line per
pool (read back from the SVG's ids); PNG too; and the one-line error naming the extra when matplotlib is missing."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from charts.model import Chart, InstanceRow, Marker, Phase, PoolSeries, Span
from charts.render import ChartsUnavailableError, check_path, figure, require, write

CHART = Chart(
    title="refresh run r1: succeeded, 1 steps",
    rows=[
        InstanceRow("i-old", "i-old nodes-a step 0", [Span(Phase.SURGE, 0, 10), Span(Phase.DRAIN, 10, 20)]),
        InstanceRow("i-spare", "i-spare nodes-a spare", [Span(Phase.LAUNCH, 0, 10), Span(Phase.READY, 10, 30)]),
        InstanceRow("i-other", "i-other nodes-b", [Span(Phase.READY, 0, 30)], [Marker("cordoned", 12.5)]),
    ],
    pools=[PoolSeries("nodes-a", [(0, 2), (10, 3), (20, 2)]), PoolSeries("nodes-b", [(0, 1)])],
    end=30,
    origin=datetime(2026, 12, 2, 10, 0, tzinfo=UTC),
)


def svg_ids(path: Path) -> list[str]:
    return [e.get("id", "") for e in ET.parse(path).iter() if "|" in e.get("id", "")]


def test_the_svg_holds_each_instance_row_and_each_pool_series(tmp_path: Path) -> None:
    path = write(CHART, tmp_path / "run.svg")
    assert path.stat().st_size > 0
    ids = svg_ids(path)
    spans = Counter(i.split("|")[1] for i in ids if i.startswith("span|"))
    assert spans == {"i-old": 2, "i-spare": 2, "i-other": 1}
    assert [i for i in ids if i.startswith("marker|")] == ["marker|i-other|cordoned|0"]
    assert [i for i in ids if i.startswith("pool|")] == ["pool|nodes-a", "pool|nodes-b"]


def test_the_figure_has_a_row_label_per_instance_and_a_line_per_pool() -> None:
    fig = figure(CHART)
    timeline, capacity = fig.axes
    assert [t.get_text() for t in timeline.get_yticklabels()] == [r.label for r in CHART.rows]
    assert [line.get_label() for line in capacity.get_lines()] == ["nodes-a", "nodes-b"]
    xs, ys = capacity.get_lines()[0].get_data()
    assert list(ys) == [2, 3, 2, 2] and list(xs) == [0, 10, 20, 30]  # held to the chart's end


def test_a_png_is_written_too(tmp_path: Path) -> None:
    path = write(CHART, tmp_path / "run.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_unknown_suffix_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"\.svg"):
        write(CHART, tmp_path / "run.jpg")


def test_without_matplotlib_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # import fails as if not installed
    with pytest.raises(ChartsUnavailableError, match=r"aws-node-manager\[charts\]"):
        require()


def test_a_chart_path_is_refused_up_front_for_its_suffix_or_a_missing_folder(tmp_path: Path) -> None:
    check_path(tmp_path / "run.svg")
    with pytest.raises(ValueError, match="give a name ending in"):
        check_path(tmp_path / "run.txt")
    with pytest.raises(ValueError, match="no folder"):
        check_path(tmp_path / "missing" / "run.svg")
