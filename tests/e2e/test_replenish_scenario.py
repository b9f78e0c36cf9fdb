"""End to end: the main job's replenish scenario passes every check on the local world.

Real: the replenisher handler against moto driven by the event pump, the capacity-outage fault, ``python -m agent``
(membership and the drains of the borrowed instances), kube-apiserver + etcd with the simulator.
"""

from __future__ import annotations

import io

from scenarios import replenish
from scenarios.timeline import Timeline


def test_az_outage_is_covered_then_given_back_through_the_agent(world, tmp_path):
    out = io.StringIO()
    timeline = Timeline(out=out, progress=out)
    replenish.run(world, timeline, tmp_path)
    timeline.print_timeline()
    timeline.print_verdict()
    assert [c for c in timeline.checks if not c.passed] == [], out.getvalue()
    names = {c.name.split(":")[0] for c in timeline.checks}
    assert {"invariant 2", "invariant 3", "invariant 4", "invariant 5"} <= names
    story = [e.what for e in sorted(timeline.entries, key=lambda e: e.at)]
    first = {
        key: next(i for i, w in enumerate(story) if key in w)
        for key in (
            "no Spot capacity",
            "intent: cover",
            "capacity again",
            "give-back starts",
            "with decrement",
            "given back and cleared",
        )
    }
    order = [
        "no Spot capacity",
        "intent: cover",
        "capacity again",
        "give-back starts",
        "with decrement",
        "given back and cleared",
    ]
    assert [first[k] for k in order] == sorted(first[k] for k in order)
