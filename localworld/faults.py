"""Faults moto cannot produce on its own, injected in-process into moto's Auto Scaling backend.

moto launches every instance an ASG asks for, at once. ``CapacityOutage`` makes chosen ASGs behave as an Auto Scaling
group in an Availability Zone without Spot capacity does: their launches fail (InService + Pending stays below the
desired capacity), each failed attempt is an ``"EC2 Instance Launch Unsuccessful"`` event, and after ``recover`` the
group launches what it misses, each instance announced by the ``EventBus`` as ``"EC2 Instance Launch Successful"``.

How: moto's ``FakeAutoScalingGroup.replace_autoscaling_group_instances`` is what launches instances for a group
(on create, SetDesiredCapacity, UpdateAutoScalingGroup, and after an instance of the group terminates). The outage
shadows it on the failing group's object with a function that launches nothing and enqueues the failure event;
``recover`` removes the shadow and sets the group's desired capacity again, which launches the missing instances.
moto runs in this process (``ThreadedMotoServer``), so the backend is ``moto.backends.get_backend("autoscaling")
[account][region]``. ``moto.reset`` (the world's reset) rebuilds the backends, which ends every outage with it.

The failure event's ``StatusMessage`` and ``Cause`` follow what Auto Scaling reports for a Spot capacity shortage.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from moto.backends import get_backend

from localworld.eventbus import DEFAULT_ACCOUNT, Event, EventBus, launch_event

NO_SPOT_CAPACITY = "There is no Spot capacity available that matches your request."
INSUFFICIENT_CAPACITY = (
    "We currently do not have sufficient capacity in the Availability Zone you requested. "
    "Launching EC2 instance failed."
)
ACTIVE_STATES = ("InService", "Pending", "Pending:Wait", "Pending:Proceed")


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class CapacityOutage:
    """Make ASGs unable to launch, and able again.

    Args:
        bus: where failure events go (``EventBus.enqueue``); None to only collect them in ``events``.
        account, region: moto's backend to act on (and the events' envelope).
        clock: the events' time; injectable.
        status_message: the failure's ``StatusMessage`` (default: no Spot capacity).
    """

    def __init__(
        self,
        bus: EventBus | None = None,
        *,
        account: str = DEFAULT_ACCOUNT,
        region: str = "us-east-1",
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        status_message: str = NO_SPOT_CAPACITY,
    ) -> None:
        self.bus = bus
        self.account = account
        self.region = region
        self.clock = clock
        self.status_message = status_message
        self.events: list[Event] = []
        self.attempts: dict[str, int] = {}  # ASG name -> failed launch attempts
        self._failing: set[str] = set()
        self._lock = threading.Lock()

    # -- moto access ---------------------------------------------------------------------------------------

    def _backend(self) -> Any:
        return get_backend("autoscaling")[self.account][self.region]

    def _group(self, asg_name: str) -> Any:
        groups = self._backend().autoscaling_groups
        if asg_name not in groups:
            raise KeyError(f"no Auto Scaling group {asg_name!r} in moto ({self.account}/{self.region})")
        return groups[asg_name]

    @staticmethod
    def active_count(group: Any) -> int:
        """InService + Pending instances of a moto group."""
        return sum(1 for s in group.instance_states if s.lifecycle_state in ACTIVE_STATES)

    # -- the fault -----------------------------------------------------------------------------------------

    @property
    def failing(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._failing)

    def fail(self, asg_name: str) -> None:
        """From now on ``asg_name`` launches nothing; each launch it attempts is a failure event."""
        group = self._group(asg_name)

        def launch_fails(count_needed: int, propagated_tags: dict[str, str]) -> None:
            self._failed(group, count_needed)

        group.replace_autoscaling_group_instances = launch_fails  # shadows the class method on this group only
        with self._lock:
            self._failing.add(asg_name)

    def recover(self, asg_name: str) -> list[str]:
        """``asg_name`` launches again; it launches what it misses now. Returns the new instance ids."""
        group = self._group(asg_name)
        group.__dict__.pop("replace_autoscaling_group_instances", None)
        with self._lock:
            self._failing.discard(asg_name)
        before = {s.instance.id for s in group.instance_states}
        group.set_desired_capacity(group.desired_capacity)
        return [s.instance.id for s in group.instance_states if s.instance.id not in before]

    def retry(self, asg_name: str | None = None) -> list[Event]:
        """Auto Scaling's periodic retry: every failing group (or only ``asg_name``) still below its desired
        capacity fails once more. Returns the failure events made."""
        made: list[Event] = []
        for name in sorted(self.failing if asg_name is None else {asg_name} & self.failing):
            group = self._group(name)
            missing = int(group.desired_capacity or 0) - self.active_count(group)
            if missing > 0:
                made.append(self._failed(group, missing))
        return made

    def _failed(self, group: Any, count_needed: int) -> Event:
        now = self.clock()
        active = self.active_count(group)
        subnet = (group.vpc_zone_identifier or "").split(",")[0]
        zones = list(group.availability_zones or [])
        event = launch_event(
            group.name,
            successful=False,
            time=now,
            availability_zone=zones[0] if zones else "",
            subnet_id=subnet,
            status_message=self.status_message,
            cause=(
                f"At {_iso(now)} an instance was started in response to a difference between desired and actual "
                f"capacity, increasing the capacity from {active} to {active + count_needed}."
            ),
            account=self.account,
            region=self.region,
        )
        with self._lock:
            self.attempts[group.name] = self.attempts.get(group.name, 0) + 1
            self.events.append(event)
        if self.bus is not None:
            self.bus.enqueue(event)
        return event

    def clear(self) -> None:
        """End every outage without launching anything (groups of a reset moto are simply forgotten)."""
        for name in list(self.failing):
            with contextlib.suppress(KeyError):  # the group is gone (a reset moto)
                self._group(name).__dict__.pop("replace_autoscaling_group_instances", None)
        with self._lock:
            self._failing.clear()
