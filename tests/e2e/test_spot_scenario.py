"""End to end: the main job's Spot interruption scenario passes every check on the local world.

Everything real runs: the interruption handler against moto, ``python -m agent`` as its own process with its own
RBAC identity, kube-apiserver + etcd with the simulator playing kubelets and controllers.
"""

from __future__ import annotations

import io

from scenarios import spot
from scenarios.timeline import Timeline


def test_spot_warning_ends_drained_and_replaced(world, tmp_path):
    out = io.StringIO()
    timeline = Timeline(out=out, progress=out)
    spot.run(world, timeline, tmp_path)
    timeline.print_timeline()
    timeline.print_verdict()
    failed = [c for c in timeline.checks if not c.passed]
    assert failed == [], out.getvalue()
    names = {c.name for c in timeline.checks}
    assert any(n.startswith("invariant 3") for n in names) and any(n.startswith("invariant 4") for n in names)
    # the second delivery's answer is the first's, replayed: the detail must not read as a second action
    (duplicate,) = [c for c in timeline.checks if c.name.startswith("invariant 7")]
    assert "by replaying the first's answer" in duplicate.detail, duplicate.detail
    # The timeline tells the whole story, in order.
    story = [e.what for e in sorted(timeline.entries, key=lambda e: e.at)]
    first = {
        key: next(i for i, w in enumerate(story) if key in w)
        for key in ("received", "cordoned", "drain succeeded", "launched replacement", "Spot reclaims")
    }
    assert first["received"] < first["cordoned"] < first["drain succeeded"] < first["Spot reclaims"]
    assert first["launched replacement"] < first["Spot reclaims"]


def test_verdict_fails_when_an_invariant_breaks():
    """The verdict is not a formality: one failed check makes the run not ok (and the main job exit 1)."""
    timeline = Timeline(out=io.StringIO(), progress=io.StringIO())
    timeline.check("a", True)
    assert timeline.ok
    timeline.check("invariant 4: desired capacity ends where it was", False, "desired 3 -> 4")
    assert not timeline.ok
