"""A driver of the refresher's pure decision over the Auto Scaling model of ``lifecycle_model`` (``Driver``: an
invocation a minute, every decision kept, the group's surge checked against the units its steps hold after every
pass), with a model that refuses hand-overs or keeps drains running (``Slow``): the shared setup of the hand-over
tests. Pure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from core.capacity import Bounds
from core.runs import Run
from lambdas.refresher.bounds import capacity_bounds
from lambdas.refresher.decide import Decision, advance
from lambdas.refresher.plan import SendCommand, SetCapacity, TerminateInstance
from tests.unit.lambdas.refresher.decide.lifecycle_model import OLD1, OLD2, OLD3, SETTINGS, T0, Model, iid

OLD4 = iid(5)
OLDS = [OLD1, OLD2, OLD3, OLD4]
FAR = (T0 + timedelta(days=1)).isoformat()


@dataclass
class Slow(Model):
    """``Model`` whose Auto Scaling refuses the next ``refused_handovers`` terminations without decrement of a worker
    (the instance stays in service), and whose agent leaves drains running while ``drains_run``."""

    refused_handovers: int = 0
    drains_run: bool = False

    def apply(self, actions: list[object], bounds: dict[str, Bounds]) -> None:
        kept = []
        for a in actions:
            handover = isinstance(a, TerminateInstance) and not a.decrement and a.instance_id in self.instances
            if handover and self.refused_handovers:
                self.refused_handovers -= 1
                continue
            kept.append(a)
        super().apply(kept, bounds)
        if self.drains_run:
            for a in kept:
                if isinstance(a, SendCommand):
                    self.commands[a.command.command_id] = {"status": "running", "command": {"deadline": FAR}}


@dataclass
class Driver:
    """Invocations every ``tick`` s (up to 20 passes each), every decision kept; Auto Scaling tops the group up
    between invocations. ``until(done)`` stops right after the pass where ``done(driver)`` first holds (before Auto
    Scaling launches anything)."""

    model: Model
    run: Run
    now: datetime = T0
    tick: float = 60
    decisions: list[Decision] = field(default_factory=list)

    def invocation(self, done: Callable[[Driver], bool] | None = None) -> bool:
        for _ in range(20):
            world = self.model.world()
            decision = advance(self.run, world, SETTINGS, self.now)
            self.model.apply(decision.actions, capacity_bounds(decision.run, world, SETTINGS))
            self.run = decision.run
            self.decisions.append(decision)
            for group in self.run.groups:  # who holds a unit, always as many as the group's surge says
                assert group.raised == self.run.units_held(group.name), (group, self.run.steps)
            if done is not None and done(self):
                return True
            if not decision.changed:
                break
        self.model.autoscale()
        self.now += timedelta(seconds=self.tick)
        return False

    def until(self, done: Callable[[Driver], bool]) -> None:
        end = self.now + timedelta(hours=6)
        while self.now < end and self.run.status.active:
            if self.invocation(done):
                return
        raise AssertionError(f"never reached: {self.run.waiting}")

    def finish(self) -> None:
        end = self.now + timedelta(hours=6)
        while self.now < end and self.run.status.active:
            self.invocation()
        assert not self.run.status.active, self.run.waiting

    def terminations(self) -> list[tuple[str, bool]]:
        return [
            (a.instance_id, a.decrement) for d in self.decisions for a in d.actions if isinstance(a, TerminateInstance)
        ]

    def raises(self) -> int:
        return sum(1 for d in self.decisions for a in d.actions if isinstance(a, SetCapacity) and a.desired is not None)


def handed(driver: Driver) -> bool:
    return any(s.handed_over_to is not None for s in driver.run.steps)
