"""sim.eventbridge: the stack's rules route each event to its function; a failed invocation is retried as Lambda's
asynchronous invocation does (1 min, 2 min) within the maximum event age; scheduled rules fire on time."""

from __future__ import annotations

from typing import Any

from sim.eventbridge import AGENT_SOURCE, Delivery, EventBus, stack_rules
from sim.kernel import Kernel
from sim.lambdas import Invocation


class Recorder:
    def __init__(self, kernel: Kernel, fail: int = 0) -> None:
        self.kernel = kernel
        self.calls: list[tuple[float, str, str]] = []
        self.fail = fail

    def __call__(
        self, function: str, event: dict[str, Any], crash_at: int = 0, kind: str = "crash", *_: Any, **__: Any
    ) -> Invocation:
        self.calls.append((self.kernel.t, function, str(event.get("detail-type") or event.get("trigger"))))
        if self.fail:
            self.fail -= 1
            return Invocation(function, "error", error="RetryableError")
        return Invocation(function, "ok", response={})


def bus_with(kernel: Kernel, recorder: Recorder, **delivery: Any) -> EventBus:
    options = {"min_delay": 1.0, "max_delay": 1.0, "duplicate": 0.0, **delivery}
    return EventBus(kernel, recorder, stack_rules("c1"), Delivery(**options))


def event(bus: EventBus, source: str, detail_type: str, **detail: Any) -> dict[str, Any]:
    return bus.envelope(source, detail_type, detail, [])


def test_each_event_reaches_the_functions_of_its_rules() -> None:
    kernel = Kernel(1)
    rec = Recorder(kernel)
    bus = bus_with(kernel, rec)
    bus.put(event(bus, "aws.ec2", "EC2 Spot Instance Interruption Warning", **{"instance-id": "i-1"}))
    bus.put(event(bus, "aws.autoscaling", "EC2 Instance Launch Successful"))
    bus.put(event(bus, AGENT_SOURCE, "Node Drain Succeeded", cluster="c1", command_id="refresh-r1-0"))
    bus.put(event(bus, AGENT_SOURCE, "Node Drain Succeeded", cluster="c1", command_id="giveback-i-1"))
    bus.put(event(bus, AGENT_SOURCE, "Node Drain Succeeded", cluster="c1", command_id="spot-i-2"))  # a Spot drain's
    bus.put(event(bus, AGENT_SOURCE, "Node Cordon Succeeded", cluster="c1", command_id="rebalance-i-3"))
    bus.put(event(bus, AGENT_SOURCE, "Node Drain Succeeded", cluster="other", command_id="refresh-r1-0"))  # another's
    bus.put(event(bus, AGENT_SOURCE, "Node Ready", cluster="c1"))  # the refresher's only
    bus.put(event(bus, AGENT_SOURCE, "Node Ready", cluster="other"))
    bus.put(event(bus, "aws.ec2", "EC2 Instance State-change Notification", state="running"))  # not a going state
    kernel.run(10)
    assert sorted((f, d) for _, f, d in rec.calls) == [
        ("interruption", "EC2 Spot Instance Interruption Warning"),
        ("refresher", "Node Cordon Succeeded"),  # a rebalance cordon's result wakes a replacement run
        ("refresher", "Node Drain Succeeded"),  # no Launch Successful: the refresher has no rule for it
        ("refresher", "Node Ready"),
        ("replenisher", "EC2 Instance Launch Successful"),
        ("replenisher", "Node Drain Succeeded"),  # its own command's only
    ]
    assert bus.stats.unmatched == 4


def test_a_failed_invocation_is_retried_twice_then_dropped() -> None:
    kernel = Kernel(1)
    rec = Recorder(kernel, fail=10)
    bus = bus_with(kernel, rec)
    bus.put(event(bus, "aws.autoscaling", "EC2 Instance Launch Unsuccessful"))
    kernel.run(3600)
    assert [t for t, _, _ in rec.calls] == [1.0, 61.0, 181.0]
    assert bus.stats.retried == 2
    assert bus.stats.dropped == 1


def test_no_retry_past_the_maximum_event_age() -> None:
    kernel = Kernel(1)
    rec = Recorder(kernel, fail=10)
    bus = bus_with(kernel, rec, max_event_age=100.0)
    bus.put(event(bus, "aws.autoscaling", "EC2 Instance Launch Unsuccessful"))
    kernel.run(3600)
    assert [t for t, _, _ in rec.calls] == [1.0, 61.0]
    assert bus.stats.dropped == 1


def test_a_retry_that_succeeds_ends_the_delivery() -> None:
    kernel = Kernel(1)
    rec = Recorder(kernel, fail=1)
    bus = bus_with(kernel, rec)
    bus.put(event(bus, "aws.autoscaling", "EC2 Instance Launch Unsuccessful"))
    kernel.run(3600)
    assert len(rec.calls) == 2
    assert bus.stats.dropped == 0


def test_duplicates_carry_the_same_event_id() -> None:
    kernel = Kernel(1)
    seen: list[str] = []

    def invoke(
        function: str, ev: dict[str, Any], crash_at: int = 0, kind: str = "crash", *_: Any, **__: Any
    ) -> Invocation:
        seen.append(str(ev["id"]))
        return Invocation(function, "ok", response={})

    bus = EventBus(kernel, invoke, stack_rules("c1"), Delivery(duplicate=1.0))
    bus.put(event(bus, "aws.ec2", "EC2 Spot Instance Interruption Warning"))
    kernel.run(60)
    assert len(seen) == 2 and seen[0] == seen[1]


def test_scheduled_rules_fire_on_time() -> None:
    kernel = Kernel(1)
    rec = Recorder(kernel)
    bus = bus_with(kernel, rec)
    bus.schedule_rules()
    kernel.run(7 * 86400)
    ticks = [t for t, f, d in rec.calls if f == "replenisher"]
    assert ticks[:2] == [120.0, 240.0] and len(ticks) == 7 * 720
    weekly = [t for t, f, d in rec.calls if d == "schedule"]
    assert weekly == [6 * 86400 + 3 * 3600]  # Sunday 03:00 UTC: cron(0 3 ? * SUN *)
    assert kernel.now().weekday() == 0  # a week later, Monday again


def test_a_crash_window_names_the_call_for_its_function_only() -> None:
    kernel = Kernel(1)
    plans: list[tuple[str, int, str]] = []

    def invoke(
        function: str, ev: dict[str, Any], crash_at: int = 0, kind: str = "crash", *_: Any, **__: Any
    ) -> Invocation:
        plans.append((function, crash_at, kind))
        return Invocation(function, "ok", response={})

    bus = EventBus(kernel, invoke, stack_rules("c1"), Delivery(duplicate=0.0))
    bus.crash(0, 100, "replenisher", 3, "timeout")
    bus.put(event(bus, AGENT_SOURCE, "Node Drain Succeeded", cluster="c1", command_id="refresh-r1-0"))
    bus.put(event(bus, AGENT_SOURCE, "Node Drain Succeeded", cluster="c1", command_id="giveback-i-1"))
    kernel.run(60)
    assert sorted(plans) == [("refresher", 0, "crash"), ("replenisher", 3, "timeout")]
