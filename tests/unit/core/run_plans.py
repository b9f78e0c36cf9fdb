"""A run as planned (``planned``): control-plane groups of one master and worker groups of the given sizes, every step
pending, at ``max_surge``. Shared by the run-size tests (``test_runpeak``, the refresher's ``test_runsize``)."""

from __future__ import annotations

from datetime import UTC, datetime

from core.runs import GroupSurge, Run, RunOptions, RunStep

T0 = datetime(2026, 12, 2, 10, 0, 0, 123456, tzinfo=UTC)


def planned(max_surge: int, sizes: dict[str, int], masters: int = 0) -> Run:
    """``masters`` control-plane groups of one, then a worker group per ``sizes`` entry (name -> instances)."""
    groups = [
        GroupSurge(name=f"master-{m}", role="control-plane", min_size=1, original_desired=1, original_max=1)
        for m in range(masters)
    ]
    groups += [
        GroupSurge(name=g, role="node", min_size=1, original_desired=n, original_max=n) for g, n in sizes.items()
    ]
    steps = [
        RunStep(index=m, group=f"master-{m}", role="control-plane", instance_id=f"i-0{m:016x}") for m in range(masters)
    ]
    for g, n in sizes.items():
        steps += [
            RunStep(index=len(steps), group=g, role="node", instance_id=f"i-0{len(steps):016x}") for _ in range(n)
        ]
    steps = [s.model_copy(update={"index": i, "instance_id": f"i-0{i:016x}"}) for i, s in enumerate(steps)]
    return Run(
        run_id="20261202T100000Z-abcdef",
        cluster="demo",
        options=RunOptions(max_surge=max_surge),
        created_at=T0,
        updated_at=T0,
        groups=groups,
        steps=steps,
    )
