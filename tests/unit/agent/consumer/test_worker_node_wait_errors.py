"""A transient Kubernetes API error while a drain waits for its node (``CommandWorker._cordon_or_wait``,
``steps.NodeWait``, a review finding): a miss, not "cordoned"."""

from __future__ import annotations

import pytest

from agent.consumer import steps
from core.exceptions import KubernetesApiError, NodeNotFoundError
from core.model import Command
from tests.unit.agent.consumer_world import ScriptedEngine, World, command, succeed


class FlakyLateNode(ScriptedEngine):
    """No node for the instance until the ``registers_at``-th cordon probe; probe ``flaky_at`` meets a transient
    Kubernetes API error (a 5xx/429 on the GET or the paged scan). ``run`` finds the node only once it registered,
    as ``DrainEngine.run`` (``find_node``) would."""

    def __init__(self, flaky_at: int, registers_at: int) -> None:
        super().__init__(answer=self._run)
        self.flaky_at = flaky_at
        self.registers_at = registers_at
        self.probes = 0
        self.registered = False

    def cordon(self, command: Command, scan: bool = True) -> None:
        self.probes += 1
        if self.probes == self.flaky_at:
            raise KubernetesApiError("503 from the apiserver")
        if self.probes < self.registers_at:
            raise NodeNotFoundError(command.instance_id)
        self.registered = True
        super().cordon(command)

    def _run(self, command: Command):  # type: ignore[no-untyped-def]
        if not self.registered:
            raise NodeNotFoundError(command.instance_id)
        return succeed(command)


def test_a_transient_api_error_during_the_node_wait_does_not_end_the_wait(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Spot drain waiting for its late node meets one transient API error on a probe. ``cordon_first`` used to
    swallow it and return None ("cordoned, the drain tries again"): the worker left the wait, the engine found no node
    and the drain ended ``skipped``, the node registering a probe later. The probe error is now a miss."""
    monkeypatch.setattr(steps, "NODE_WAIT_POLL_SECONDS", 0.05)  # fast probes
    engine = FlakyLateNode(flaky_at=2, registers_at=3)
    consumer = world.consumer(engine)
    world.send(command("spot-1", deadline_in=120).model_copy(update={"reason": "spot-interruption:terminate"}))
    consumer.handle(world.receive())
    item = world.item()
    assert item["status"] == "succeeded", (item["status"], item["result"]["message"], engine.probes)
    assert engine.cordoned == ["spot-1"]
