"""A replacement run of one worker group (``run``) and the rebalance cordon that stays its fallback (``cordon``): the
shared setup of ``test_replacement`` and ``test_replacement_refused``."""

from __future__ import annotations

from datetime import timedelta

from core.model import Command, CommandKind, DrainOptions
from core.runs import REBALANCE_TRIGGER, GroupSurge, Run, RunOptions, RunStep
from tests.unit.lambdas.interruption.effects_world import NOW

VICTIM = "i-0a1b2c3d4e5f60718"
GROUP = GroupSurge(name="nodes", role="node", min_size=1, original_desired=1, original_max=3)


def run(run_id: str = "20240305T101530Z-abcdef", *instances: str, trigger: str = REBALANCE_TRIGGER) -> Run:
    return Run(
        run_id=run_id,
        cluster="demo",
        options=RunOptions(trigger=trigger, max_surge=2),
        groups=[GROUP],
        steps=[
            RunStep(index=i, group="nodes", role="node", instance_id=iid) for i, iid in enumerate(instances or ["i-1"])
        ],
        created_at=NOW,
        updated_at=NOW,
    )


def cordon(instance: str) -> Command:
    return Command(
        command_id="rebalance-ev",
        cluster="demo",
        kind=CommandKind.CORDON,
        instance_id=instance,
        deadline=NOW + timedelta(minutes=10),
        reason="rebalance-recommendation",
        options=DrainOptions(uncordon_after_seconds=1800),
    )
