"""The verdict points at the invariants it cites, by anchors that exist in the clone's docs/DESIGN.md."""

from __future__ import annotations

import io
import re
from pathlib import Path

from scenarios.timeline import Timeline

DESIGN = Path(__file__).resolve().parents[3] / "docs" / "DESIGN.md"


def test_the_verdict_links_each_cited_invariant_and_ends_with_the_headline():
    out = io.StringIO()
    timeline = Timeline(out=out, progress=io.StringIO())
    timeline.check("invariant 5: PDBs honoured", True)
    timeline.check("invariant 3: drained before terminated", True)
    timeline.check("the agent is still running", True)
    timeline.print_verdict()
    lines = out.getvalue().strip().splitlines()
    assert lines[-1] == "OK: 3/3 checks passed"
    [link] = [line for line in lines if "invariants:" in line]
    anchors = re.findall(r"DESIGN\.md#(invariant-\d)", link)
    assert anchors == ["invariant-3", "invariant-5"]
    text = DESIGN.read_text()
    for anchor in anchors:
        assert f'<a id="{anchor}"></a>' in text


def test_every_invariant_of_the_design_has_its_anchor():
    section = DESIGN.read_text().split("## Safety invariants")[1].split("\n## ")[0]
    numbers = re.findall(r"^(\d+)\. ", section, re.M)
    assert numbers and all(f'{n}. <a id="invariant-{n}"></a>' in section for n in numbers)
