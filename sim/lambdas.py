"""The three Lambdas' own ``handle()`` run on simulated time against the in-memory ports (issue 12).

Each invocation builds nothing new: the ``Deps`` of each function (``lambdas.<name>.handler.Deps``) are made once, as
an execution environment keeps them, on a ``Store`` over the in-memory table and the simulated AWS gateway, with a
``Telemetry`` that only counts and settings built here with explicit values. The call runs inside
``Kernel.installed()``, so every ``utcnow()`` of the product is the kernel's time, and takes no simulated time: a
pass is one step. The refresher's clock, budget clock and sleep are the kernel's (``wait_budget_seconds=0``: one
pass, never a poll); the replenisher does not wait for a held lock (``lock_wait_seconds=0``: in the simulation a
refresh pass never holds the lock across steps, only a crashed one does, until its lease ends).

How an invocation ends (AWS Lambda Developer Guide, "Error handling and automatic retries in Lambda" and
"Asynchronous invocation"): ``ok`` (a response, including rejections and acknowledgements), ``error`` (the handler
raised: a ``RetryableError`` or any other exception is a function error, retried by the asynchronous invocation),
``crash`` (the process died between two port calls: ``LambdaCrash``; every later port call of that invocation is dead
too, so no ``finally`` of the product gets to release anything) and ``timeout`` (the same, named as Lambda's
"Task timed out"). Retries are ``sim.eventbridge``'s business.

**Execution environments** (AWS Lambda Developer Guide, "Lambda execution environment lifecycle"): Lambda runs an
invocation in an idle warm environment of the function when it has one, else initialises a new one (a cold start: the
handler's ``Deps`` built anew), and resets the environment an invocation crashed or timed out in ("Failures during the
invoke phase"); a function error leaves it warm. Each function's environments are modelled so: the last idle one runs
the next invocation, an invocation run while another of the same function is under way (an interleaved one) gets
another, and a crash or a timeout discards its own, so the next one starts with empty memos (the refresher's
``Deps.memo``, ``Deps.gather_memo`` and its ``RunStore``'s; the replenisher's ``Deps.memo`` and ``hooks_seen``, so a
cold replenisher checks its groups' termination hooks again). Warm state spares work: a cold read answers as a warm
one (each memo keyed by content or by the version read), but for the membership memo's reuse of a read within
``REUSE_SECONDS`` (``adapters.dynamo.node_memo``: the times of items refreshed unchanged meanwhile) and the hooks a
cold replenisher checks again (calls, so a seed's trace).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, cast

import lambdas.refresher.service as refresher_service
from adapters.aws.ports import AutoScalingPort, AwsPort, CommandSender, Ec2Port
from adapters.dynamo.store import Store
from core import runids
from core.settings import InterruptionSettings, RefresherSettings, ReplenisherSettings
from lambdas.common.telemetry import Telemetry
from lambdas.events.scope import Scope
from lambdas.interruption import handler as interruption
from lambdas.refresher import handler as refresher
from lambdas.replenisher import handler as replenisher
from sim.kernel import Kernel

ACCOUNT = "123456789012"
REGION = "us-east-1"
TABLE = "node-manager"
QUEUE_URL = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/node-manager-commands"
FUNCTIONS = ("interruption", "replenisher", "refresher")


class LambdaCrash(BaseException):
    """The execution environment died mid-invocation (a crash or Lambda's timeout): raised from a port call. A
    ``BaseException``, so no ``except Exception`` of the product swallows it."""

    def __init__(self, kind: str, call: str) -> None:
        super().__init__(f"{kind} at {call}")
        self.kind = kind
        self.call = call


class CountingTelemetry(Telemetry):
    """``Telemetry`` that publishes nothing and counts every metric by name (``name`` or ``name:value`` for a
    dimensioned count), for the run's summary."""

    def __init__(self) -> None:  # no Powertools Metrics: nothing is published
        self.counts: dict[str, float] = {}

    def count(self, name: str, value: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + value

    def count_by(self, name: str, dimension: str, value: str) -> None:
        key = f"{name}:{value}"
        self.counts[key] = self.counts.get(key, 0) + 1

    def seconds(self, name: str, value: float) -> None:
        self.counts[name] = self.counts.get(name, 0) + value

    def flush(self) -> None:
        return None


@dataclass
class Frame:
    """One invocation under way: its function, its crash plan (the ``at``-th port call, 1-based, raises
    ``LambdaCrash(kind)``, and so does every call after it; 0 = none), and an interleaving (before its
    ``interleave_at``-th port call, ``interleave`` runs: another invocation, start to end, as a concurrent one would
    between two of this one's calls)."""

    function: str
    at: int = 0
    kind: str = "crash"
    calls: int = 0
    dead: bool = False
    interleave_at: int = 0
    interleave: Callable[[], None] | None = None


@dataclass
class Tripwire:
    """What every port call of a Lambda passes first: the crash plan and interleaving of the innermost invocation
    under way (``frames``), and the observers (the invariant checker), told the function, the call and its
    arguments before the call is made. ``function`` names the caller of a port call made outside any invocation
    (a test's)."""

    frames: list[Frame] = field(default_factory=list)
    function: str = ""
    observers: list[Callable[[str, str, tuple[Any, ...], dict[str, Any]], None]] = field(default_factory=list)

    @property
    def calls(self) -> int:
        return self.frames[-1].calls if self.frames else 0

    def check(self, call: str, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> None:
        """Pass (telling the observers), run the interleaved invocation when its turn comes, or die."""
        frame = self.frames[-1] if self.frames else None
        if frame is not None:
            if frame.dead:
                raise LambdaCrash(frame.kind, call)
            frame.calls += 1
            if frame.at and frame.calls >= frame.at:
                frame.dead = True
                raise LambdaCrash(frame.kind, call)
            if frame.interleave is not None and frame.calls >= frame.interleave_at:
                other, frame.interleave = frame.interleave, None
                other()
        function = frame.function if frame is not None else self.function
        for observer in self.observers:
            observer(function, call, args, kwargs or {})


_PLAIN = (str, bytes, int, float, bool, type(None), dict, list, tuple)


class _Wired:
    """A proxy whose method calls pass the tripwire first (attributes that are objects are proxied in turn).

    A method's wrapper is made at its first use and kept on the proxy (Python then finds it without ``__getattr__``):
    it looks the method up on the target at each call, after the tripwire, so a method replaced on the target since
    (a test's or a benchmark's counting wrapper) is the one called, as before."""

    def __init__(self, target: Any, name: str, wire: Tripwire) -> None:
        self._target = target
        self._name = name
        self._wire = wire

    def __getattr__(self, attr: str) -> Any:
        target = self._target
        value = getattr(target, attr)
        if isinstance(value, _PLAIN):
            return value
        label = f"{self._name}.{attr}"
        if callable(value):
            wire = self._wire

            def call(*args: Any, **kwargs: Any) -> Any:
                wire.check(label, args, kwargs)
                return getattr(target, attr)(*args, **kwargs)

            self.__dict__[attr] = call
            return call
        return _Wired(value, label, self._wire)


class _WiredAws:
    """``AwsPort`` whose three ports' calls pass the tripwire."""

    def __init__(self, aws: AwsPort, wire: Tripwire) -> None:
        self._autoscaling = cast(AutoScalingPort, _Wired(aws.autoscaling, "autoscaling", wire))
        self._ec2 = cast(Ec2Port, _Wired(aws.ec2, "ec2", wire))
        self._queue = cast(CommandSender, _Wired(aws.queue, "sqs", wire))

    @property
    def autoscaling(self) -> AutoScalingPort:
        return self._autoscaling

    @property
    def ec2(self) -> Ec2Port:
        return self._ec2

    @property
    def queue(self) -> CommandSender:
        return self._queue


@dataclass(frozen=True)
class Invocation:
    """How one invocation ended: ``status`` ``ok`` | ``error`` | ``crash`` | ``timeout``; the response (``ok``) or
    the error's type and message; the port calls it made."""

    function: str
    status: str
    response: dict[str, Any] | None = None
    error: str = ""
    calls: int = 0

    @property
    def failed(self) -> bool:
        """A function error: Lambda's asynchronous invocation retries it."""
        return self.status != "ok"


def settings_for(cluster: str, **overrides: Any) -> tuple[InterruptionSettings, ReplenisherSettings, RefresherSettings]:
    """The three functions' settings, built in code (the defaults an operator deploys, plus what the simulation
    needs: no polling, no waiting for a lock inside a step). ``overrides`` maps ``<function>.<field>`` to a value."""
    common: dict[str, Any] = {
        "cluster_name": cluster,
        "table_name": TABLE,
        "queue_url": QUEUE_URL,
        "account_id": ACCOUNT,
    }

    def pick(prefix: str) -> dict[str, Any]:
        return {k.split(".", 1)[1]: v for k, v in overrides.items() if k.startswith(prefix + ".")}

    return (
        InterruptionSettings(**common, **pick("interruption")),
        ReplenisherSettings(**common, lock_wait_seconds=0, function_timeout_seconds=60, **pick("replenisher")),
        RefresherSettings(**common, wait_budget_seconds=0, function_timeout_seconds=120, **pick("refresher")),
    )


class Lambdas:
    """The three functions, each with its execution environments' ``Deps`` (module docstring).

    Args:
        kernel: the simulation's kernel.
        table: the in-memory state table (``sim.dynamo.MemoryTable``, a stand-in for a boto3 ``Table``).
        aws: the simulated AWS gateway (``sim.aws.SimAws``: ``.autoscaling``, ``.ec2``, ``.queue``).
        cluster: the cluster's name.
        overrides: settings overrides (``settings_for``).
    """

    def __init__(self, kernel: Kernel, table: Any, aws: AwsPort, cluster: str, **overrides: Any) -> None:
        self.kernel = kernel
        self.wire = Tripwire()
        self.telemetry = CountingTelemetry()
        self.invocations: dict[str, int] = {}
        self.outcomes: dict[str, int] = {}
        self.on_invocation: list[Callable[[Invocation, Any], None]] = []
        wired_aws = _WiredAws(aws, self.wire)
        store = Store(_Wired(table, "dynamodb", self.wire), cluster)
        self.interruption_settings, self.replenisher_settings, self.refresher_settings = settings_for(
            cluster, **overrides
        )
        scope = Scope(account=ACCOUNT, region=REGION)

        def interruption_environment() -> interruption.Deps:
            return interruption.Deps(
                settings=self.interruption_settings, store=store, aws=wired_aws, telemetry=self.telemetry, scope=scope
            )

        def replenisher_environment() -> replenisher.Deps:
            return replenisher.Deps(
                settings=self.replenisher_settings,
                store=store,
                aws=wired_aws,
                telemetry=self.telemetry,
                scope=scope,
                sleep=_no_sleep(kernel),
            )

        def refresher_environment() -> refresher.Deps:
            return refresher.Deps(
                settings=self.refresher_settings,
                store=store,
                aws=wired_aws,
                telemetry=self.telemetry,
                clock=kernel.now,
                sleep=_no_sleep(kernel),
                monotonic=kernel.monotonic,
                scope=scope,
            )

        # each function's first execution environment; more are made as Lambda makes them (module docstring)
        self.interruption = interruption_environment()
        self.replenisher = replenisher_environment()
        self.refresher = refresher_environment()
        self._new_environment: dict[str, Callable[[], Any]] = {
            "interruption": interruption_environment,
            "replenisher": replenisher_environment,
            "refresher": refresher_environment,
        }
        # each function's warm environments not running an invocation (the last one used last)
        self.idle: dict[str, list[Any]] = {
            "interruption": [self.interruption],
            "replenisher": [self.replenisher],
            "refresher": [self.refresher],
        }
        self.cold_starts: dict[str, int] = {}  # each function's environments made after its first
        self._ids = kernel.stream("lambdas:ids")
        _quiet_product_logs()

    def invoke(
        self,
        function: str,
        event: Any,
        crash_at: int = 0,
        crash_kind: str = "crash",
        interleave_at: int = 0,
        interleave: Callable[[], None] | None = None,
    ) -> Invocation:
        """Run ``function``'s ``handle(event)`` now; ``crash_at`` > 0 kills it at that port call; ``interleave``
        (another invocation) runs before its ``interleave_at``-th port call."""
        frame = Frame(function, crash_at, crash_kind, interleave_at=interleave_at, interleave=interleave)
        self.wire.frames.append(frame)
        self.invocations[function] = self.invocations.get(function, 0) + 1
        environment = self._environment(function)
        try:
            with self.kernel.installed(), _seeded_run_ids(self._ids):
                response = self._handle(function, event, environment)
            result = Invocation(function, "ok", response=response, calls=frame.calls)
        except LambdaCrash as crash:
            environment = None  # reset: the next invocation starts cold
            result = Invocation(function, crash.kind, error=crash.call, calls=frame.calls)
        except Exception as err:  # noqa: BLE001 - any exception is a function error Lambda retries; recorded
            result = Invocation(function, "error", error=f"{type(err).__name__}: {err}", calls=frame.calls)
        finally:
            self.wire.frames.pop()
        if environment is not None:
            self.idle[function].append(environment)  # warm for the next invocation
        key = f"{function}:{result.status}"
        self.outcomes[key] = self.outcomes.get(key, 0) + 1
        for listener in self.on_invocation:
            listener(result, event)
        return result

    def _environment(self, function: str) -> Any:
        """The environment (``Deps``) an invocation of ``function`` runs in: its last idle warm one, else a new one (a
        cold start); None for a function the simulation does not have (``_handle`` refuses it)."""
        idle = self.idle.get(function)
        if idle is None:
            return None
        if idle:
            return idle.pop()
        self.cold_starts[function] = self.cold_starts.get(function, 0) + 1
        return self._new_environment[function]()

    def _handle(self, function: str, event: Any, environment: Any) -> dict[str, Any]:
        if function == "interruption":
            return interruption.handle(event, environment)
        if function == "replenisher":
            request_id = f"{self._ids.getrandbits(64):016x}"
            return replenisher.handle(event, environment, request_id=request_id)
        if function == "refresher":
            return refresher.handle(event, environment)
        raise ValueError(f"no function {function!r}")


def _seeded_run_ids(rng: random.Random) -> AbstractContextManager[None]:
    """A refresh run's id is ``<start>-<6 hex>`` and an invocation without a Lambda request id names itself (the
    lock holder ``refresher:<run>:<invocation>``) with 12 hex digits, both from ``secrets`` (``core.runids``);
    within a simulated invocation the hex comes from the run's stream instead, so one seed gives one exact run."""
    return runids.hex_source(lambda n: f"{rng.getrandbits(8 * n):0{2 * n}x}")


def _no_sleep(kernel: Kernel) -> Callable[[float], None]:
    """A ``Deps.sleep`` that refuses (``Kernel.sleep`` raises ``SimulatedSleepError``): a wait is a later step."""

    def sleep(seconds: float) -> None:
        kernel.sleep(seconds)

    return sleep


def _quiet_product_logs() -> None:
    """The Lambdas' Powertools loggers write JSON lines to stdout; a simulated week makes millions. Only errors are
    kept (the trace records every invocation's outcome instead)."""
    for module in (interruption, replenisher, refresher_service):
        module.logger.setLevel(logging.ERROR)
