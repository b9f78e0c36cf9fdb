"""A small in-process EventBridge for the local world: events in the documented AWS shape, dispatched to handlers.

moto stores EventBridge rules but never invokes a Lambda target, and Auto Scaling in moto emits no events at all.
The pump plays that part for tests and scenarios:

- **Auto Scaling**: it diffs each ASG's instance ids between two polls (DescribeAutoScalingGroups, paginated) and
  emits ``"EC2 Instance Launch Successful"`` (source ``aws.autoscaling``) for every new one, shaped as the Auto
  Scaling event reference documents (https://docs.aws.amazon.com/autoscaling/ec2/userguide/
  ec2-auto-scaling-event-reference.html). The first poll only takes the baseline (no events for what already ran).
  Every ASG of the account is watched, as EventBridge would deliver them all: handlers filter foreign ones.
- **Agent events**: with ``observer_queue_url`` (``ClusterInfo.observer_queue_url``, where the world's EventBridge
  rule sends every ``node-manager.agent`` event), it drains that queue and dispatches each event as delivered. Off by
  default, since some tests read that queue themselves.
- **Injected events**: ``publish(event)`` dispatches at once; ``enqueue(event)`` waits for the next ``pump``
  (``localworld.faults`` enqueues its ``"EC2 Instance Launch Unsuccessful"`` events this way).
- **Schedules**: ``scheduled_event(rule_name)`` builds the ``"Scheduled Event"`` (source ``aws.events``) a rule with a
  schedule expression sends; ``tick(rule_name)`` publishes one.

Handlers are registered per (source, detail-type) with ``subscribe``; a handler is any callable taking the event dict
(e.g. ``lambda e: replenisher_handler.handle(e, deps, now=clock())``). A handler that raises does not stop the pump:
the error is kept in the ``Delivery`` (as EventBridge would retry and then dead-letter it). ``history`` keeps every
dispatched event with its deliveries, for timelines and assertions.

Typical use::

    bus = EventBus(world.session, observer_queue_url=info.observer_queue_url)
    bus.subscribe("aws.autoscaling", "EC2 Instance Launch Unsuccessful", on_failure)
    bus.pump()                        # baseline + whatever is pending
    ...                               # something launches instances
    deliveries = bus.pump()           # "EC2 Instance Launch Successful" for each new instance, dispatched
    bus.start(interval=0.5); ...; bus.stop()   # or pump in a background thread
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

DEFAULT_ACCOUNT = "123456789012"  # moto's default account id
AUTOSCALING_SOURCE = "aws.autoscaling"
LAUNCH_SUCCESSFUL = "EC2 Instance Launch Successful"
LAUNCH_UNSUCCESSFUL = "EC2 Instance Launch Unsuccessful"
SCHEDULE_SOURCE = "aws.events"
SCHEDULED_EVENT = "Scheduled Event"

Event = dict[str, Any]
Handler = Callable[[Event], Any]


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _iso_ms(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def envelope(
    source: str,
    detail_type: str,
    detail: Mapping[str, Any],
    *,
    time: datetime,
    resources: Iterable[str] = (),
    account: str = DEFAULT_ACCOUNT,
    region: str = "us-east-1",
    event_id: str | None = None,
) -> Event:
    """An EventBridge event: ``{"version": "0", "id", "detail-type", "source", "account", "time", "region",
    "resources", "detail"}`` (``time`` as ``yyyy-mm-ddThh:mm:ssZ``; ``id`` a fresh UUID unless given)."""
    return {
        "version": "0",
        "id": event_id or str(uuid.uuid4()),
        "detail-type": detail_type,
        "source": source,
        "account": account,
        "time": _iso(time),
        "region": region,
        "resources": list(resources),
        "detail": dict(detail),
    }


def asg_arn(asg_name: str, *, account: str = DEFAULT_ACCOUNT, region: str = "us-east-1") -> str:
    """An Auto Scaling group ARN (the group's UUID part is made up: nothing here reads it)."""
    return (
        f"arn:aws:autoscaling:{region}:{account}:autoScalingGroup:{uuid.uuid5(uuid.NAMESPACE_DNS, asg_name)}:"
        f"autoScalingGroupName/{asg_name}"
    )


def launch_event(
    asg_name: str,
    *,
    successful: bool,
    time: datetime,
    instance_id: str = "",
    availability_zone: str = "",
    subnet_id: str = "",
    status_message: str = "",
    cause: str = "",
    started: datetime | None = None,
    account: str = DEFAULT_ACCOUNT,
    region: str = "us-east-1",
) -> Event:
    """An ``"EC2 Instance Launch Successful"`` or ``"EC2 Instance Launch Unsuccessful"`` event (source
    ``aws.autoscaling``) in the shape of the Auto Scaling event reference.

    ``detail``: ``StatusCode`` (``InProgress`` for a launch that succeeded, ``Failed`` otherwise),
    ``AutoScalingGroupName``, ``ActivityId``, ``RequestId`` (= the activity id), ``Details`` (``Availability Zone``,
    ``Subnet ID``), ``StatusMessage`` (failures), ``StartTime``, ``EndTime``, ``EC2InstanceId`` (empty when no
    instance was created, as for a Spot capacity failure), ``Cause``, ``Origin`` ``EC2``, ``Destination``
    ``AutoScalingGroup``.
    """
    activity = str(uuid.uuid4())
    detail: dict[str, Any] = {
        "StatusCode": "InProgress" if successful else "Failed",
        "AutoScalingGroupName": asg_name,
        "ActivityId": activity,
        "Details": {"Availability Zone": availability_zone, "Subnet ID": subnet_id},
        "RequestId": activity,
        "EndTime": _iso_ms(time),
        "EC2InstanceId": instance_id,
        "StartTime": _iso_ms(started or time),
        "Cause": cause,
        "Origin": "EC2",
        "Destination": "AutoScalingGroup",
    }
    if not successful:
        detail["StatusMessage"] = status_message
    resources = [asg_arn(asg_name, account=account, region=region)]
    if instance_id:
        resources.append(f"arn:aws:ec2:{region}:{account}:instance/{instance_id}")
    return envelope(
        AUTOSCALING_SOURCE,
        LAUNCH_SUCCESSFUL if successful else LAUNCH_UNSUCCESSFUL,
        detail,
        time=time,
        resources=resources,
        account=account,
        region=region,
    )


def scheduled_event(
    rule_name: str, *, time: datetime, account: str = DEFAULT_ACCOUNT, region: str = "us-east-1"
) -> Event:
    """The ``"Scheduled Event"`` (source ``aws.events``, empty ``detail``, the rule's ARN as the only resource)."""
    return envelope(
        SCHEDULE_SOURCE,
        SCHEDULED_EVENT,
        {},
        time=time,
        account=account,
        region=region,
        resources=[f"arn:aws:events:{region}:{account}:rule/{rule_name}"],
    )


@dataclass
class Delivery:
    """One event given to one handler: what it returned, or the error it raised (``repr``)."""

    event: Event
    handler: str
    result: Any = None
    error: str | None = None


@dataclass
class _AsgView:
    instances: dict[str, dict[str, Any]] = field(default_factory=dict)  # instance id -> DescribeASG instance entry
    subnets: str = ""
    azs: tuple[str, ...] = ()


class EventBus:
    """The pump (see the module docstring).

    Args:
        session: something with ``.client(name)`` bound to moto (``LocalWorld.session``).
        observer_queue_url: the queue the agent's events reach (None: agent events are not pumped).
        watch_asgs: emit ``Launch Successful`` for new ASG instances.
        clock: returns the current UTC time (events' ``time``); injectable.
        account, region: put in every event's envelope; they must be the Lambdas' (``lambdas.events.scope``:
            another account's or region's event is acknowledged, not acted on). ``region`` defaults to the session's
            (``WorldSession.region``), else us-east-1.
    """

    def __init__(
        self,
        session: Any,
        *,
        observer_queue_url: str | None = None,
        watch_asgs: bool = True,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        account: str = DEFAULT_ACCOUNT,
        region: str | None = None,
    ) -> None:
        self.autoscaling = session.client("autoscaling")
        self.sqs = session.client("sqs") if observer_queue_url else None
        self.observer_queue_url = observer_queue_url
        self.watch_asgs = watch_asgs
        self.clock = clock
        self.account = account
        self.region: str = region or getattr(session, "region", None) or "us-east-1"
        self.history: list[tuple[Event, list[Delivery]]] = []
        self._handlers: dict[tuple[str, str], list[Handler]] = {}
        self._pending: list[Event] = []
        self._asgs: dict[str, _AsgView] | None = None
        self._lock = threading.RLock()
        self._thread: threading.Thread | None = None
        self._halt = threading.Event()
        self.errors: list[str] = []  # pump failures in the background thread

    # -- registration and injection ------------------------------------------------------------------------

    def subscribe(self, source: str, detail_type: str, handler: Handler) -> None:
        """Deliver every event with this (source, detail-type) to ``handler`` (several handlers: in order)."""
        with self._lock:
            self._handlers.setdefault((source, detail_type), []).append(handler)

    def publish(self, event: Event) -> list[Delivery]:
        """Dispatch ``event`` now to its handlers; returns the deliveries (none when nobody subscribed)."""
        with self._lock:
            handlers = list(self._handlers.get((event.get("source", ""), event.get("detail-type", "")), []))
        deliveries = []
        for handler in handlers:
            name = getattr(handler, "__qualname__", repr(handler))
            try:
                deliveries.append(Delivery(event, name, result=handler(event)))
            except Exception as err:  # noqa: BLE001 - EventBridge would retry/dead-letter; kept for the caller
                deliveries.append(Delivery(event, name, error=f"{type(err).__name__}: {err}"))
        with self._lock:
            self.history.append((event, deliveries))
        return deliveries

    def enqueue(self, event: Event) -> None:
        """Keep ``event`` for the next ``pump`` (thread-safe; fault injectors call this)."""
        with self._lock:
            self._pending.append(event)

    def tick(self, rule_name: str = "node-manager-tick") -> list[Delivery]:
        """Publish one ``"Scheduled Event"`` of ``rule_name`` now."""
        return self.publish(scheduled_event(rule_name, time=self.clock(), account=self.account, region=self.region))

    # -- polling -------------------------------------------------------------------------------------------

    def poll(self) -> list[Event]:
        """Collect the events that happened since the last poll, without dispatching them: injected ones first,
        then new ASG instances, then agent events from the observer queue."""
        with self._lock:
            events, self._pending = self._pending, []
        if self.watch_asgs:
            events += self._asg_events()
        if self.sqs is not None:
            events += self._observer_events()
        return events

    def pump(self) -> list[Delivery]:
        """``poll`` and dispatch every event collected; returns all deliveries in order."""
        deliveries: list[Delivery] = []
        for event in self.poll():
            deliveries += self.publish(event)
        return deliveries

    def baseline(self) -> None:
        """Take the ASGs' current instances as known (no ``Launch Successful`` for them)."""
        self._asgs = self._describe_asgs()

    def _describe_asgs(self) -> dict[str, _AsgView]:
        views: dict[str, _AsgView] = {}
        for page in self.autoscaling.get_paginator("describe_auto_scaling_groups").paginate():
            for group in page.get("AutoScalingGroups", []):
                views[group["AutoScalingGroupName"]] = _AsgView(
                    instances={i["InstanceId"]: i for i in group.get("Instances", [])},
                    subnets=str(group.get("VPCZoneIdentifier", "")),
                    azs=tuple(group.get("AvailabilityZones", [])),
                )
        return views

    def _asg_events(self) -> list[Event]:
        current = self._describe_asgs()
        previous, self._asgs = self._asgs, current
        if previous is None:
            return []
        now = self.clock()
        events = []
        for name, view in current.items():
            known = previous.get(name, _AsgView()).instances
            for instance_id, entry in view.instances.items():
                if instance_id in known:
                    continue
                events.append(
                    launch_event(
                        name,
                        successful=True,
                        time=now,
                        instance_id=instance_id,
                        availability_zone=str(entry.get("AvailabilityZone", "")),
                        subnet_id=view.subnets.split(",")[0],
                        cause=(
                            f"At {_iso(now)} an instance was started in response to a difference between desired "
                            f"and actual capacity, increasing the capacity from {len(known)} to "
                            f"{len(view.instances)}."
                        ),
                        account=self.account,
                        region=self.region,
                    )
                )
        return events

    def _observer_events(self) -> list[Event]:
        assert self.sqs is not None
        events: list[Event] = []
        for _ in range(10):  # at most 100 messages per poll: a bound, the rest waits for the next one
            out = self.sqs.receive_message(QueueUrl=self.observer_queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
            messages = out.get("Messages", [])
            if not messages:
                break
            for message in messages:
                try:
                    event = json.loads(message["Body"])
                    # moto's EventBridge drops the envelope's "account" on the way to an SQS target; AWS keeps it
                    if isinstance(event, dict):
                        event.setdefault("account", self.account)
                    events.append(event)
                except (ValueError, KeyError) as err:
                    self.errors.append(f"unreadable observer message: {err}")
                self.sqs.delete_message(QueueUrl=self.observer_queue_url, ReceiptHandle=message["ReceiptHandle"])
        return events

    # -- background ----------------------------------------------------------------------------------------

    def start(self, interval: float = 0.5) -> EventBus:
        """Pump every ``interval`` seconds in a daemon thread until ``stop`` (errors kept in ``errors``)."""
        if self._thread is not None:
            return self
        self._halt.clear()

        def run() -> None:
            while not self._halt.is_set():
                try:
                    self.pump()
                except Exception as err:  # noqa: BLE001 - the pump outlives a failed read
                    self.errors.append(f"{type(err).__name__}: {err}")
                self._halt.wait(interval)

        self._thread = threading.Thread(target=run, name="eventbus-pump", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the background pump (waits up to ``timeout`` s for the current pass)."""
        self._halt.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def __enter__(self) -> EventBus:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- reading the history -------------------------------------------------------------------------------

    def events(self, source: str | None = None, detail_type: str | None = None) -> list[Event]:
        """Dispatched events, oldest first, optionally only of one source / detail-type."""
        with self._lock:
            return [
                e
                for e, _ in self.history
                if (source is None or e.get("source") == source)
                and (detail_type is None or e.get("detail-type") == detail_type)
            ]
