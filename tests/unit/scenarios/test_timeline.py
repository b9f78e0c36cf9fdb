"""The verdict points at the invariants it cites, by anchors that exist in the clone's docs/DESIGN.md."""

from __future__ import annotations

import io
import re
from pathlib import Path

from scenarios.timeline import Timeline, stamp_actions

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


def test_actions_are_stamped_with_the_time_their_log_line_was_written():
    from datetime import UTC, datetime

    log = "\n".join(
        [
            "not json",
            '{"level":"INFO","message":"cold start","timestamp":"2026-12-02 04:35:33,000+0000"}',
            '{"level":"INFO","message":"send drain command c1: sent","timestamp":"2026-12-02 04:35:33,100+0000",'
            '"action":"SendDrain","result":"sent"}',
            '{"level":"INFO","message":"detach i-1: detached","timestamp":"2026-12-02 04:35:33,900+0000",'
            '"action":"Detach","result":"detached"}',
        ]
    )
    stamps = stamp_actions(["send drain command c1", "detach i-1", "never logged"], log)
    assert stamps == [
        datetime(2026, 12, 2, 4, 35, 33, 100000, tzinfo=UTC),
        datetime(2026, 12, 2, 4, 35, 33, 900000, tzinfo=UTC),
        None,
    ]
