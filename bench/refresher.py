"""Benchmark of a rolling refresh of N workers on the local world (not a test; results go to BENCHMARKS.md).

Setup per size: 3 masters and N workers in 3 AZs (N / 3 per worker ASG); the simulator registers a new instance's
Node ``--launch`` seconds after it first sees it (a launch of fixed simulated duration), and every worker carries a
pod with a ``--drain``-second termination grace period (the kubelet completes the deletion then, so a drain takes
that long). The refresher runs as in the ``refresh`` scenario (handler in this process, agent as a process, events
pumped every 0.1 s as EventBridge delivers them; the tick is never pumped, so advancement is event-driven).

Measured: wall time from the manual invocation to the run's end (its ``finished_at``, as the refresher recorded
it; the bench reads the run once a second and pumps no "Launch Successful", which no rule routes to the refresher,
so that its own observation loads moto as little as it can), for the worker groups only (``--all``,
``max_surge``), beside the floor ``ceil(N / max_surge) x (launch + drain)``; overhead per node
``(wall - floor) / N`` (target <= 5 s), and of it the refresher's own time per node (every invocation's span less
its sleeps between polls, AWS calls included; the rest is the world's: launch, registration, the agent), and of
that the time inside its AWS calls (botocore ``before-call`` to ``after-call``: the request, moto's answer, its
parsing; the rest is the refresher's own code); AWS API
calls the refresher made per replaced node (botocore ``before-call`` events on its clients: Auto Scaling, EC2, SQS,
DynamoDB). The counter is registered on the boto3 session the refresher builds its clients from, not on the
clients themselves, so it does not depend on where the Lambda keeps them.

Usage: ``python -m bench.refresher [--sizes 9 30] [--launch 2] [--drain 2] [--max-surge 1] [--markdown] [--trace]``;
``--smoke`` runs once at the smallest size (3 workers, 1 s launch and drain) and does not judge the numbers;
``--trace`` prints each invocation of the refresher (seconds after the run's start, its trigger, its response) and
its AWS calls in order (operation and, for DynamoDB, the item kinds), to see where the calls go.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import math
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import boto3

from core.runs import RunStatus
from lambdas.refresher.handler import Deps
from localworld.workloads import deploy_pods_on_node
from localworld.world import LocalWorld
from scenarios.refreshing import RefreshHarness, wait_until

AZS = ("us-east-1a", "us-east-1b", "us-east-1c")


class CallCounter:
    """Counts AWS API calls (``service.Operation``) made by the clients a boto3 session builds while it counts.

    botocore copies a session's event handlers into each client when it creates the client, so a ``before-call``
    handler registered on the session reaches exactly the clients built after registration (here: the refresher's,
    built on its first invocation in each execution environment) and none built before (the harness's, the event
    pump's, the simulator's). That is botocore's documented event seam, not an attribute path into ``Deps``.
    """

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()
        # --trace: per invocation (in the order they started) its trigger, response status and calls in order
        self.invocations: list[Invocation] = []
        self._current = threading.local()
        self.call_seconds = 0.0  # wall seconds spent inside the counted calls (the request and moto's answer)
        self.op_seconds: Counter[str] = Counter()  # the same, per call name
        self._started = threading.local()

    @contextlib.contextmanager
    def on_session(self, session: boto3.session.Session) -> Iterator[CallCounter]:
        """Count the calls of every client ``session`` builds inside the ``with`` block."""
        unique_id = f"bench-call-counter-{id(self)}"
        session.events.register("before-call", self._count, unique_id=unique_id)
        session.events.register("after-call", self._timed, unique_id=unique_id + "-after")
        try:
            yield self
        finally:
            session.events.unregister("before-call", unique_id=unique_id)
            session.events.unregister("after-call", unique_id=unique_id + "-after")

    def _timed(self, **_: Any) -> None:
        started = getattr(self._started, "at", None)
        if started is not None:
            spent = time.monotonic() - started
            with self._lock:
                self.call_seconds += spent
                self.op_seconds[self._started.name] += spent
            self._started.at = None

    def _count(self, model: Any, params: Any = None, **_: Any) -> None:
        name = f"{model.service_model.service_name}.{model.name}"
        if model.service_model.service_name == "dynamodb":
            body = (params or {}).get("body") or b"{}"  # the request as sent: DynamoDB's JSON
            name += _item_kinds(model.name, json.loads(body.decode() if isinstance(body, bytes) else body))
        with self._lock:
            self.calls[name] += 1
        invocation = getattr(self._current, "invocation", None)
        if invocation is not None:
            invocation.calls.append(name)
        self._started.name, self._started.at = name, time.monotonic()  # the call's own time starts after the count

    def traced(self, invoke: Callable[[dict[str, Any]], dict[str, Any]], t0: list[float]) -> Callable[..., Any]:
        """``invoke`` (the harness's ``LocalInvoker.invoke``, run in the invocation's own thread) recording each
        invocation: its trigger, start (seconds after ``t0[0]``), status, and the calls made in its thread meanwhile."""

        def invoke_traced(event: dict[str, Any]) -> dict[str, Any]:
            invocation = Invocation(trigger_of(event), time.monotonic() - t0[0])
            with self._lock:
                self.invocations.append(invocation)
            self._current.invocation = invocation
            try:
                response = invoke(event)
                invocation.status = f"{response.get('status')} {response.get('reason', '')}".strip()
                return response
            finally:
                self._current.invocation = None

        return invoke_traced


@dataclasses.dataclass
class Invocation:
    """One invocation of the refresher as ``--trace`` prints it."""

    trigger: str
    start: float
    status: str = "error"
    calls: list[str] = dataclasses.field(default_factory=list)

    def line(self) -> str:
        return (
            f"+{self.start:6.1f} s  {self.trigger} -> {self.status}: {len(self.calls)} calls: {', '.join(self.calls)}"
        )


def trigger_of(event: dict[str, Any]) -> str:
    """What invoked the refresher: an event's detail-type and what it names, or a manual request's action."""
    if "detail-type" not in event:
        return f"request {event.get('action') or event.get('trigger') or sorted(event)}"
    detail = event.get("detail") or {}
    named = detail.get("command_id") or detail.get("EC2InstanceId") or detail.get("AutoScalingGroupName")
    nodes = detail.get("nodes")
    if named is None and isinstance(nodes, list):
        named = ",".join(str(n.get("instance_id", n) if isinstance(n, dict) else n) for n in nodes)
    return f"{event['detail-type']}" + (f" ({named})" if named else "")


def _item_kinds(operation: str, params: dict[str, Any]) -> str:
    """Which item kinds a table call is about, from its sort-key values (``[RUN#]``, ``[LOCK..RUN]``), so the
    breakdown tells the snapshot from the ``RUN#`` read and the lock's writes."""
    values: list[str] = []
    if operation == "Query":
        values = [str(v.get("S", "")) for v in (params.get("ExpressionAttributeValues") or {}).values()]
    elif operation in ("GetItem", "PutItem", "UpdateItem", "DeleteItem"):
        values = [str((params.get("Key") or params.get("Item") or {}).get("sk", {}).get("S", ""))]
    elif operation == "TransactWriteItems":
        for entry in params.get("TransactItems") or []:
            for body in entry.values():
                values.append(str((body.get("Key") or body.get("Item") or {}).get("sk", {}).get("S", "")))
    kinds = sorted({v.split("#")[0].rstrip("$") for v in values if v and not v.startswith("CLUSTER#")})
    return f"[{'+'.join(kinds)}]" if kinds else ""


ADVANCING = ("advanced", "started", "lock_lost")  # responses of invocations that ran passes over the run


def busy(span: tuple[float, float, str, int], sleeps: list[tuple[int, float, float]]) -> list[tuple[float, float]]:
    """An invocation's time minus its sleeps between polls (its thread's ``Deps.sleep`` calls inside its span)."""
    start, end, _, thread = span
    pieces, at = [], start
    for _t, s, e in sorted(x for x in sleeps if x[0] == thread and start <= x[1] and x[2] <= end):
        pieces.append((at, s))
        at = e
    return [*pieces, (at, end)]


def overlapping(spans: list[tuple[float, float, str, int]], sleeps: list[tuple[int, float, float]]) -> tuple[int, int]:
    """(invocations that ran passes over the run, how many of them were at work, not sleeping between polls, while
    another such invocation was at work too)."""
    runs = [busy(span, sleeps) for span in spans if span[2] in ADVANCING]
    overlapped = set()
    for i, a in enumerate(runs):
        for j in range(i + 1, len(runs)):
            if any(s1 < e2 and s2 < e1 for s1, e1 in a for s2, e2 in runs[j]):
                overlapped |= {i, j}
    return len(runs), len(overlapped)


def measure(
    world: LocalWorld, workers: int, launch: float, drain: int, max_surge: int, trace: bool = False
) -> dict[str, Any]:
    per_az = workers // len(AZS)
    info = world.setup_cluster(azs=AZS, nodes_per_az=per_az, join_delay=launch, timeout=60 + launch * 2)
    simulator = world.simulator
    assert simulator is not None, "setup_cluster starts the simulator"
    for node in simulator.nodes():
        if "node-role.kubernetes.io/node" in node["metadata"].get("labels", {}):
            deploy_pods_on_node(world.api, node["metadata"]["name"], 1, grace=drain, namespace="bench", wait=False)
    counter = CallCounter()
    sleeps: list[tuple[int, float, float]] = []  # (thread, start, end) of every sleep between two polls

    def timed_sleep(deps: Deps) -> Deps:
        inner = deps.sleep

        def sleep(seconds: float) -> None:
            start = time.monotonic()
            inner(seconds)
            sleeps.append((threading.get_ident(), start, time.monotonic()))

        deps.sleep = sleep
        return deps

    h = RefreshHarness(
        world,
        info,
        # the event-ended waits (launch, node Ready) at the product's default: the events drive the run
        refresher_env={
            "REFRESH_POLL_SECONDS": "0.5",
            "REFRESH_EVENT_WAIT_POLL_SECONDS": "20",
            "REFRESH_WAIT_BUDGET_SECONDS": "60",
        },
        deps_hook=timed_sleep,
        watch_asgs=False,  # Launch Successful reaches no rule of the refresher: not pumped, not counted in moto
    )
    started = [time.monotonic()]
    if trace:  # every invocation goes through invoke (EventBridge's too, from the invoker's threads)
        h.invoker.invoke = counter.traced(h.invoker.invoke, started)  # type: ignore[method-assign]
    # After the harness and its event pump built their clients, before the refresher builds its own.
    with counter.on_session(world.session.boto), contextlib.redirect_stdout(io.StringIO()):
        h.start(membership_timeout=60)
        wait_until(
            lambda: all(p["status"].get("phase") == "Running" for p in simulator.pods("bench")),
            30,
            "the bench pods to run",
        )
        counter.calls.clear()
        counter.invocations.clear()
        started[0] = time.monotonic()
        t0_epoch = time.time()
        response = h.refresh(all=True, instance_groups=list(info.worker_asgs.values()), max_surge=max_surge)
        # read once a second (every read of the RUN# item, O(N) in size, queues behind moto's one DynamoDB request
        # at a time with the refresher's); the run's end is when the refresher recorded it, not when it was seen
        run = h.wait_run(response["run"]["run_id"], 60 + workers * (launch + drain + 15), interval=1.0)
        assert run.finished_at is not None, run
        wall = run.finished_at.timestamp() - t0_epoch
        h.stop()
    assert run.status is RunStatus.SUCCEEDED, run.reason
    replaced = sum(1 for s in run.steps if s.state.value == "done")
    handed = sum(1 for s in run.steps if s.handed_over_to is not None)  # surge units handed to the next step
    floor = math.ceil(workers / max_surge) * (launch + drain)
    by_service: Counter[str] = Counter()
    for key, n in counter.calls.items():
        by_service[key.split(".")[0]] += n
    return {
        "workers": workers,
        "replaced": replaced,
        "handed_over": handed,
        "max_surge": max_surge,
        "launch": launch,
        "drain": drain,
        "wall": wall,
        "floor": floor,
        "overhead_per_node": (wall - floor) / workers,
        "calls_per_node": sum(counter.calls.values()) / replaced,
        "by_service": {k: v / replaced for k, v in sorted(by_service.items())},
        "top_calls": counter.calls.most_common(6),
        "calls": {k: v / replaced for k, v in counter.calls.most_common()},
        "invocations": overlapping(h.invoker.spans, sleeps),
        # the refresher's own time: every invocation's span less its sleeps between polls, AWS calls included
        "work_per_node": sum(e - s for span in h.invoker.spans for s, e in busy(span, sleeps)) / replaced,
        # of which inside its AWS calls (request, moto's answer, parsing): the rest is the refresher's own code
        "calls_seconds_per_node": counter.call_seconds / replaced,
        "ms_per_call": {k: 1000 * v / n for k, v in counter.op_seconds.most_common() if (n := counter.calls[k])},
        "ready_events": len(h.bus.events(detail_type="Node Ready")),
        "events": len(h.bus.events()),
        "ticks": len(h.bus.events(source="aws.events")),
        "trace": [i.line() for i in counter.invocations],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.refresher", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[9, 30])
    parser.add_argument("--launch", type=float, default=2.0, help="simulated launch-to-Ready seconds")
    parser.add_argument("--drain", type=int, default=2, help="grace period of each worker's pod (seconds)")
    parser.add_argument("--max-surge", type=int, default=1)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="once at the smallest size; numbers not judged")
    parser.add_argument(
        "--trace", action="store_true", help="print each invocation: its trigger and its AWS calls in order"
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.sizes, args.launch, args.drain = [len(AZS)], 1.0, 1
    results = []
    with LocalWorld() as world:
        for size in args.sizes:
            world.reset()
            result = measure(world, size, args.launch, args.drain, args.max_surge, args.trace)
            results.append(result)
            if args.trace:
                print(f"N={size}: {len(result['trace'])} invocations", file=sys.stderr)
                print("\n".join(result["trace"]), file=sys.stderr, flush=True)
            print(
                f"N={size}: wall {result['wall']:.1f} s, floor {result['floor']:.1f} s, overhead "
                f"{result['overhead_per_node']:.2f} s/node (the refresher at work "
                f"{result['work_per_node']:.2f} s/node, of which in AWS calls "
                f"{result['calls_seconds_per_node']:.2f}), "
                f"{result['calls_per_node']:.1f} AWS calls/node "
                f"{result['by_service']}, per call {', '.join(f'{k} {v:.1f}' for k, v in result['calls'].items())}; "
                f"invocations advancing the run {result['invocations'][0]}, of which at work while another was "
                f"{result['invocations'][1]}; {result['events']} events ({result['ready_events']} Node Ready), "
                f"{result['ticks']} ticks; {result['handed_over']} of {result['replaced']} steps handed their surge "
                "unit to the next; ms a call: " + ", ".join(f"{k} {v:.0f}" for k, v in result["ms_per_call"].items()),
                file=sys.stderr,
                flush=True,
            )
    if args.markdown:
        print(
            "| workers N | max surge | launch + drain (s) | floor (s) | wall (s) | overhead / node (s) | "
            "refresher at work / node (s) | of which in AWS calls (s) | AWS calls / node | "
            "of which DynamoDB / Auto Scaling / EC2 / SQS |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in results:
            s = r["by_service"]
            print(
                f"| {r['workers']} | {r['max_surge']} | {r['launch']:g} + {r['drain']} | {r['floor']:.0f} | "
                f"{r['wall']:.1f} | {r['overhead_per_node']:.2f} | {r['work_per_node']:.2f} | "
                f"{r['calls_seconds_per_node']:.2f} | {r['calls_per_node']:.1f} | "
                f"{s.get('dynamodb', 0):.1f} / {s.get('autoscaling', 0):.1f} / {s.get('ec2', 0):.1f} / "
                f"{s.get('sqs', 0):.1f} |"
            )
    ok = args.smoke or all(r["overhead_per_node"] <= 5.0 for r in results)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
