"""Draws a ``charts.model.Chart`` into one self-contained file with matplotlib (the ``charts`` extra): the instances'
timeline on top (one row per instance, a bar per phase, markers for moments), the Ready nodes per pool below, on one
time axis (seconds since the chart's origin).

The format follows the file's suffix: ``.svg`` (default choice: text, opens in any browser), ``.png``, ``.pdf``. In
an SVG every drawn series is a group whose ``id`` names it (``span|<instance>|<phase>|<n>``,
``marker|<instance>|<what>|<n>``, ``pool|<pool>``), so a test or a script can read it back.

Uses ``matplotlib.figure.Figure`` directly (no ``pyplot``: no global figure state, safe from any thread).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from charts.model import Chart, Phase

if TYPE_CHECKING:
    from matplotlib.figure import Figure

EXTRA = "charts"
MISSING = (
    "charts need matplotlib, which is not installed: pip install 'aws-node-manager[charts]' "
    "(or, in a checkout, pip install -r requirements-dev.txt)"
)
FORMATS = (".svg", ".png", ".pdf")

COLOURS: dict[Phase, str] = {
    Phase.LAUNCH: "#9ecae1",
    Phase.READY: "#74c476",
    Phase.SURGE: "#c7e9c0",
    Phase.CORDONED: "#fdd0a2",
    Phase.DRAIN: "#fd8d3c",
    Phase.DRAINED: "#d9d9d9",
    Phase.TERMINATE: "#de2d26",
    Phase.SETTLE: "#9e9ac8",
    Phase.UNDO: "#969696",
    Phase.NOT_READY: "#636363",
}
MARKERS = {"Ready": "^", "cordoned": "v", "left group": "x"}


class ChartsUnavailableError(Exception):
    """matplotlib is not installed (the message says how to install the ``charts`` extra)."""


def require() -> None:
    """Check the plotting library is there before any work (a command given ``--chart`` fails first, not last).

    Raises:
        ChartsUnavailableError: matplotlib cannot be imported.
    """
    _figure_class()


def _figure_class() -> type[Figure]:
    try:
        from matplotlib.figure import Figure
    except ImportError as missing:
        raise ChartsUnavailableError(MISSING) from missing
    return Figure


def check_path(path: Path) -> None:
    """Raises ValueError unless ``path``'s suffix is one of ``FORMATS`` and its folder exists (checked before a
    scenario runs, so a chart that could not be written is said at once, not after the run)."""
    if path.suffix.lower() not in FORMATS:
        raise ValueError(f"chart file {path}: give a name ending in {', '.join(FORMATS)}")
    if not path.parent.is_dir():
        raise ValueError(f"chart file {path}: no folder {path.parent}")


def figure(chart: Chart) -> Figure:
    """The chart as a matplotlib ``Figure`` (not saved). Raises ``ChartsUnavailableError`` without matplotlib."""
    figure_class = _figure_class()
    from matplotlib.patches import Patch

    rows = chart.rows
    height = 2.2 + 0.32 * max(len(rows), 1) + 2.4
    fig = figure_class(figsize=(12, height), layout="constrained")
    timeline, capacity = fig.subplots(
        2, 1, sharex=True, gridspec_kw={"height_ratios": [max(len(rows), 1) * 0.32 + 0.6, 2.2]}
    )
    fig.suptitle(chart.title, fontsize=11, horizontalalignment="left", x=0.01)
    for y, row in enumerate(rows):
        for n, span in enumerate(row.spans):
            timeline.barh(
                y,
                span.end - span.start,
                left=span.start,
                height=0.6,
                color=COLOURS[span.phase],
                edgecolor="white",
                linewidth=0.5,
                gid=_gid("span", row.instance_id, span.phase.value, n),
            )
        for n, marker in enumerate(row.markers):
            timeline.plot(
                [marker.at],
                [y],
                linestyle="none",
                marker=MARKERS.get(marker.what, "|"),
                markersize=7,
                color="black",
                gid=_gid("marker", row.instance_id, marker.what, n),
            )
    timeline.set_yticks(range(len(rows)), [row.label for row in rows], fontsize=7)
    timeline.set_ylim(len(rows) - 0.5 if rows else 0.5, -0.5)
    used = [p for p in Phase if any(s.phase is p for r in rows for s in r.spans)]
    if used:
        timeline.legend(
            handles=[Patch(color=COLOURS[p], label=p.value) for p in used],
            loc="upper left",
            bbox_to_anchor=(1.0, 1.0),
            fontsize=7,
            title="phase",
            title_fontsize=7,
        )
    timeline.grid(axis="x", alpha=0.3)
    for series in chart.pools:
        xs = [t for t, _ in series.points] + [chart.end]
        ys = [n for _, n in series.points] + [series.points[-1][1] if series.points else 0]
        capacity.step(xs, ys, where="post", label=series.pool, gid=_gid("pool", series.pool))
    capacity.set_ylabel("Ready nodes", fontsize=8)
    capacity.set_ylim(bottom=0)
    capacity.yaxis.get_major_locator().set_params(integer=True)
    if chart.pools:
        capacity.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7, title="pool", title_fontsize=7)
    capacity.grid(alpha=0.3)
    since = f" (0 = {chart.origin:%Y-%m-%d %H:%M:%S} UTC)" if chart.origin else ""
    capacity.set_xlabel(f"seconds{since}" + (f"\n{chart.note}" if chart.note else ""), fontsize=8)
    capacity.set_xlim(left=chart.start, right=max(chart.end, chart.start + 1.0))
    return fig


def write(chart: Chart, path: Path) -> Path:
    """Draw ``chart`` into ``path`` (format from its suffix, ``FORMATS``); returns the path.

    Raises:
        ChartsUnavailableError: matplotlib is not installed.
        ValueError: an unknown suffix.
        OSError: the file cannot be written.
    """
    check_path(path)
    fig = figure(chart)
    fig.savefig(path, metadata={"Date": None} if path.suffix.lower() == ".svg" else None)
    return path


def _gid(*parts: object) -> str:
    """An SVG id from parts joined by ``|`` (spaces as ``_``: an id has none)."""
    return "|".join(str(p).replace(" ", "_") for p in parts)
