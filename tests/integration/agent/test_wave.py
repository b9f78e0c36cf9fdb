"""A wave of Spot warnings on the local world (issue 9): every warned node is cordoned at once, whatever the number
of drains running, so no pod evicted from one warned node is bound to another; and a drain received after its
deadline still cordons its node. The agent is ``python -m agent`` with its production settings; the warnings go
through the interruption handler (``bench.wave``, which the Wave benchmark runs at larger sizes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.wave import prepare, run_wave
from localworld.world import LocalWorld
from tests.integration.agent.harness import Harness, wait_for

pytestmark = pytest.mark.world

WAVE = 20


def test_a_wave_of_20_warnings_cordons_every_node_at_once_and_no_pod_lands_on_a_warned_node(
    world: LocalWorld, tmp_path: Path
) -> None:
    # 2 spare workers only: pods evicted early have few safe places, so a warned node left schedulable gets them
    targets, store = prepare(world, WAVE, spare=2, log_dir=str(tmp_path), tag="test")
    result = run_wave(world, targets, store, timeout=150)
    assert result.last_cordon - result.calls_span <= 5.0, result  # all cordoned within seconds of the last warning
    # from the moment its command is queued, no new pod is bound to a warned node still schedulable (before, only the
    # Lambda knows; after its cordon, a binding is the local world's scheduler acting on its cached view of the node)
    assert result.onto_schedulable == 0, result
    assert result.terminal == WAVE and result.statuses.get("succeeded") == WAVE, result
    assert result.before_deadline == WAVE, result


def test_a_drain_received_after_its_deadline_still_cordons_its_node(world: LocalWorld, tmp_path: Path) -> None:
    harness = Harness(world, world.setup_cluster(nodes_per_az=1), tmp_path)
    node, instance_id = harness.worker_node()
    command = harness.command("spot-late-1", instance_id, deadline_in=-5)
    harness.send(command)
    agent = harness.agent()
    wait_for(lambda: harness.status(command.command_id) == "timed_out", 30, "the late drain to end", agent)
    item = harness.store.get_command(command.command_id)
    assert item is not None and item["result"]["message"] == "deadline passed before start"
    assert world.core.read_node(node).spec.unschedulable is True
