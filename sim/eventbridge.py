"""EventBridge in memory: the stack's rules, delivery to the Lambdas with delay, duplicates and reordering, the
scheduled rules, and Lambda's asynchronous-invocation retries (issue 12).

Follows the EventBridge User Guide ("Amazon EventBridge events", "Event patterns", "Creating a rule that runs on a
schedule": delivery is at least once, events may arrive out of order, a target gets the event or the rule's constant
input) and the Lambda Developer Guide ("Asynchronous invocation": a function error is retried twice, one minute then
two minutes later; an event older than the maximum event age is discarded). The rules are the stack's
(``infra/interruption.py``, ``infra/lifecycle.py``, ``infra/replenisher.py``, ``infra/refresher.py``): which
detail-types go to which function, the replenisher's 2-minute tick, the refresher's 5-minute tick with input
``{"trigger": "tick"}`` and its weekly ``cron(0 3 ? * SUN *)`` with input ``{"trigger": "schedule"}``.

Events are plain dicts in EventBridge's envelope (``version``, ``id``, ``detail-type``, ``source``, ``account``,
``time``, ``region``, ``resources``, ``detail``). Every delay, duplicate and id is drawn from the kernel's streams.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from sim.kernel import Kernel
from sim.lambdas import ACCOUNT, REGION, Invocation

AGENT_SOURCE = "node-manager.agent"
DRAIN_RESULTS = ("Node Drain Succeeded", "Node Drain Failed", "Node Drain Skipped")
NODE_READY = "Node Ready"
CORDON_RESULTS = ("Node Cordon Succeeded", "Node Cordon Failed", "Node Cordon Skipped")
# the command id prefixes each function's result rule matches (infra/replenisher.py, infra/refresher.py)
REPLENISHER_COMMANDS = ("giveback-", "surplus-")
REFRESHER_COMMANDS = ("refresh-", "rebalance-")
GOING_STATES = ("stopping", "shutting-down", "terminated")
WEEK = 7 * 86400.0


class Invoker(Protocol):
    """Runs a function on a payload now (``sim.lambdas.Lambdas.invoke``): with a crash plan, and an interleaved
    invocation run before its ``interleave_at``-th port call."""

    def __call__(
        self,
        function: str,
        event: dict[str, Any],
        crash_at: int = 0,
        crash_kind: str = "crash",
        interleave_at: int = 0,
        interleave: Callable[[], None] | None = None,
    ) -> Invocation: ...


@dataclass(frozen=True)
class Rule:
    """An event-pattern rule: ``source`` and one of ``detail_types`` match, and ``detail_filter`` (if any) holds."""

    name: str
    target: str
    source: str
    detail_types: tuple[str, ...]
    detail_filter: Callable[[dict[str, Any]], bool] | None = None

    def matches(self, event: dict[str, Any]) -> bool:
        if event.get("source") != self.source or event.get("detail-type") not in self.detail_types:
            return False
        detail = event.get("detail")
        return self.detail_filter is None or (isinstance(detail, dict) and self.detail_filter(detail))


def stack_rules(cluster: str, hook_name: str = "node-manager-drain") -> tuple[Rule, ...]:
    """The stack's event-pattern rules for ``cluster``."""

    def ours(detail: dict[str, Any]) -> bool:
        return detail.get("cluster") == cluster

    def of(prefixes: tuple[str, ...]) -> Callable[[dict[str, Any]], bool]:
        """The stack's ``{"cluster": [...], "command_id": [{"prefix": ...}, ...]}``: a string id starting with one."""
        return lambda d: ours(d) and isinstance(d.get("command_id"), str) and d["command_id"].startswith(prefixes)

    return (
        Rule("spot", "interruption", "aws.ec2", ("EC2 Spot Instance Interruption Warning",)),
        Rule("rebalance", "interruption", "aws.ec2", ("EC2 Instance Rebalance Recommendation",)),
        Rule(
            "lifecycle",
            "interruption",
            "aws.autoscaling",
            ("EC2 Instance-terminate Lifecycle Action",),
            lambda d: d.get("LifecycleHookName") == hook_name,
        ),
        Rule(
            "state-change",
            "interruption",
            "aws.ec2",
            ("EC2 Instance State-change Notification",),
            lambda d: d.get("state") in GOING_STATES,
        ),
        Rule("launch-unsuccessful", "replenisher", "aws.autoscaling", ("EC2 Instance Launch Unsuccessful",)),
        Rule("launch-successful", "replenisher", "aws.autoscaling", ("EC2 Instance Launch Successful",)),
        Rule("drain-results", "replenisher", AGENT_SOURCE, DRAIN_RESULTS, of(REPLENISHER_COMMANDS)),
        Rule(
            "refresher-drain-results", "refresher", AGENT_SOURCE, DRAIN_RESULTS + CORDON_RESULTS, of(REFRESHER_COMMANDS)
        ),
        Rule("refresher-node-ready", "refresher", AGENT_SOURCE, (NODE_READY,), ours),
    )


@dataclass(frozen=True)
class Delivery:
    """How events reach targets: a delay drawn in [``min_delay``, ``max_delay``] seconds (unequal delays reorder
    them), a duplicate with probability ``duplicate``; a failed asynchronous invocation retried after ``retry_delays``
    (one per retry), none once the event is older than ``max_event_age`` seconds."""

    min_delay: float = 0.5
    max_delay: float = 5.0
    duplicate: float = 0.01
    retry_delays: tuple[float, ...] = (60.0, 120.0)
    max_event_age: float = 3600.0


@dataclass
class BusStats:
    """What happened to events: put, matched no rule, delivered (attempts), duplicated, retried, run concurrently
    inside another invocation (overlapped), dropped (retries or age exhausted; Lambda's on-failure destination)."""

    put: int = 0
    unmatched: int = 0
    attempts: int = 0
    duplicated: int = 0
    retried: int = 0
    overlapped: int = 0
    dropped: int = 0
    dropped_events: list[tuple[str, str]] = field(default_factory=list)


class EventBus:
    """The default bus with the stack's rules and schedules.

    Args:
        kernel: the simulation's kernel.
        invoke: runs a function on an event now (``sim.lambdas.Lambdas.invoke``), with the crash plan and the
            interleaving of that attempt.
        rules: the event-pattern rules.
        delivery: delays, duplicates, retries.
    """

    def __init__(
        self,
        kernel: Kernel,
        invoke: Invoker,
        rules: tuple[Rule, ...],
        delivery: Delivery | None = None,
    ) -> None:
        self.kernel = kernel
        self.invoke = invoke
        self.rules = rules
        self.delivery = delivery or Delivery()
        self.stats = BusStats()
        self.crashes: list[tuple[float, float, str, int, str]] = []  # (start, end, function, call, kind)
        self.concurrent: list[tuple[float, float, str, int, str]] = []  # (start, end, function, call, other)
        self._rng = kernel.stream("eventbridge:delivery")
        self._ids = kernel.stream("eventbridge:ids")

    # ids and envelopes ---------------------------------------------------------------------------------------------
    def new_id(self) -> str:
        """An event id shaped as EventBridge's (a UUID), from the bus's stream."""
        h = f"{self._ids.getrandbits(128):032x}"
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def envelope(self, source: str, detail_type: str, detail: dict[str, Any], resources: list[str]) -> dict[str, Any]:
        """An event as EventBridge delivers it, stamped now."""
        return {
            "version": "0",
            "id": self.new_id(),
            "detail-type": detail_type,
            "source": source,
            "account": ACCOUNT,
            "time": self.kernel.now().strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": REGION,
            "resources": resources,
            "detail": detail,
        }

    # events ----------------------------------------------------------------------------------------------------------
    def put(self, event: dict[str, Any]) -> None:
        """Accept one event (``emit`` of the simulated services and the agent) and schedule its deliveries."""
        self.stats.put += 1
        matched = False
        for rule in self.rules:
            if rule.matches(event):
                matched = True
                self._schedule(rule.target, event, self._delay(), 0, self.kernel.t)
                if self._rng.random() < self.delivery.duplicate:
                    self.stats.duplicated += 1
                    self._schedule(rule.target, event, self._delay(), 0, self.kernel.t)
        if not matched:
            self.stats.unmatched += 1

    def deliver_now(self, target: str, payload: dict[str, Any]) -> Invocation:
        """A direct invocation (``aws lambda invoke``, the CLI): run at once, no retry (a synchronous call)."""
        return self._call(target, payload)

    def _call(self, target: str, payload: dict[str, Any]) -> Invocation:
        self.stats.attempts += 1
        crash_at, kind = self._crash_for(target)
        at, other = self._concurrent_for(target, payload)
        return self.invoke(target, payload, crash_at, kind, interleave_at=at, interleave=other)

    def crash(self, start: float, end: float, function: str, call: int, kind: str = "crash") -> None:
        """Between ``start`` and ``end`` every invocation of ``function`` dies at its ``call``-th port call."""
        self.crashes.append((start, end, function, call, kind))

    def overlap(self, start: float, end: float, function: str, call: int, other: str) -> None:
        """Between ``start`` and ``end`` every invocation of ``function`` has another run whole before its
        ``call``-th port call: ``other`` = the same function on the same payload (a duplicate delivered
        concurrently), or another function's tick (its reserved concurrency aside, Lambda runs both at once)."""
        self.concurrent.append((start, end, function, call, other))

    def _concurrent_for(self, target: str, payload: dict[str, Any]) -> tuple[int, Callable[[], None] | None]:
        t = self.kernel.t
        for start, end, function, call, other in self.concurrent:
            if function == target and start <= t < end:
                second = payload if other == target else self._tick(other)
                return call, lambda name=other, body=second: self._nested(name, body)
        return 0, None

    def _nested(self, target: str, payload: dict[str, Any]) -> None:
        self.stats.attempts += 1
        self.stats.overlapped += 1
        crash_at, kind = self._crash_for(target)
        self.invoke(target, payload, crash_at, kind)

    def _tick(self, function: str) -> dict[str, Any]:
        if function == "replenisher":
            arn = f"arn:aws:events:{REGION}:{ACCOUNT}:rule/node-manager-replenisher-tick"
            return self.envelope("aws.events", "Scheduled Event", {}, [arn])
        return {"trigger": "tick"}

    def _crash_for(self, target: str) -> tuple[int, str]:
        t = self.kernel.t
        for start, end, function, call, kind in self.crashes:
            if function == target and start <= t < end:
                return call, kind
        return 0, "crash"

    def _delay(self) -> float:
        d = self.delivery
        return d.min_delay + self._rng.random() * (d.max_delay - d.min_delay)

    def _schedule(self, target: str, payload: dict[str, Any], delay: float, attempt: int, first: float) -> None:
        label = f"deliver {target} {payload.get('detail-type') or payload.get('trigger') or payload.get('action')}"
        self.kernel.after(delay, label, lambda: self._attempt(target, payload, attempt, first))

    def _attempt(self, target: str, payload: dict[str, Any], attempt: int, first: float) -> None:
        result = self._call(target, payload)
        if not result.failed:
            return
        retries = self.delivery.retry_delays
        age = self.kernel.t - first
        if attempt < len(retries) and age + retries[attempt] <= self.delivery.max_event_age:
            self.stats.retried += 1
            self._schedule(target, payload, retries[attempt], attempt + 1, first)
        else:
            self.stats.dropped += 1
            self.stats.dropped_events.append((target, str(payload.get("detail-type") or payload)))

    # schedules -------------------------------------------------------------------------------------------------------
    def schedule_rules(self, replenisher_minutes: float = 2, refresher_minutes: float = 5, weekly: bool = True) -> None:
        """The stack's scheduled rules: the replenisher's tick (a ``Scheduled Event``), the refresher's tick and its
        weekly run (constant inputs), Sundays 03:00 UTC (the kernel's epoch is a Monday 00:00)."""
        rule_arn = f"arn:aws:events:{REGION}:{ACCOUNT}:rule/node-manager-replenisher-tick"
        self.kernel.every(
            replenisher_minutes * 60,
            "schedule replenisher-tick",
            lambda: self._schedule(
                "replenisher", self.envelope("aws.events", "Scheduled Event", {}, [rule_arn]), 0.0, 0, self.kernel.t
            ),
        )
        self.kernel.every(
            refresher_minutes * 60,
            "schedule refresher-tick",
            lambda: self._schedule("refresher", {"trigger": "tick"}, 0.0, 0, self.kernel.t),
        )
        if weekly:
            first_sunday = 6 * 86400.0 + 3 * 3600.0
            self.kernel.every(
                WEEK,
                "schedule refresher-weekly",
                lambda: self._schedule("refresher", {"trigger": "schedule"}, 0.0, 0, self.kernel.t),
                first=first_sunday,
            )
