"""A drain whose instance ends and has no node yet waits for one to register (``CommandWorker._cordon_or_wait``,
``steps.NodeWait``): probes of the node watch's index every 2 s, a paged scan on the first miss and every 8th probe,
until ``node_wait_seconds`` or the deadline. On moto, with a scripted engine."""

from __future__ import annotations

from core.exceptions import NodeNotFoundError
from core.model import Command
from tests.unit.agent.consumer_world import ScriptedEngine, World, command


class LateNode(ScriptedEngine):
    """No node for the first ``misses`` cordons; records whether each scanned the node list."""

    def __init__(self, misses: int) -> None:
        super().__init__()
        self.misses = misses
        self.scans: list[bool] = []

    def cordon(self, command: Command, scan: bool = True) -> None:
        self.scans.append(scan)
        if len(self.scans) <= self.misses:
            raise NodeNotFoundError(command.instance_id)
        super().cordon(command)


def _spot(command_id: str = "spot-1", deadline_in: float = 120) -> Command:
    return command(command_id, deadline_in=deadline_in).model_copy(update={"reason": "spot-interruption:terminate"})


def test_a_spot_drain_with_no_node_yet_probes_the_index_until_it_registers_then_drains(world: World) -> None:
    engine = LateNode(misses=2)
    consumer = world.consumer(engine)
    world.send(_spot())
    consumer.handle(world.receive())
    assert engine.scans == [True, False, False]  # the first miss scanned; the probes ask the watch's index
    assert engine.cordoned == ["spot-1"] and engine.ran == ["spot-1"]
    assert world.item()["status"] == "succeeded"
    assert consumer.worker.counters.snapshot().get("node_wait") == 1


def test_a_refresh_drain_with_no_node_is_skipped_at_once(world: World) -> None:
    engine = LateNode(misses=5)
    consumer = world.consumer(engine)
    world.send(command("refresh-r1-0", deadline_in=900).model_copy(update={"reason": "refresh r1 step 0"}))
    consumer.handle(world.receive())
    assert engine.scans == [True] and engine.ran == []  # its instance stays: nothing to wait for
    assert world.item("refresh-r1-0")["status"] == "skipped"


def test_a_spot_drain_whose_node_never_registers_is_skipped_when_its_wait_ends(world: World) -> None:
    engine = LateNode(misses=100)
    consumer = world.consumer(engine, node_wait_seconds=3)
    world.send(_spot())
    consumer.handle(world.receive())
    item = world.item()
    assert item["status"] == "skipped" and "none registered within 3 s" in item["result"]["message"]
    assert len(engine.scans) == 3 and engine.scans[-1]  # probes at 0, 2 and 3 s: the last one scans
    assert engine.ran == []
