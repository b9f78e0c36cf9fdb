"""Health of the agent process and its HTTP endpoint: ``/healthz``, ``/readyz`` and ``/metrics``.

- ``/healthz`` (liveness probe): every registered loop of the process ticked within ``LIVENESS_MAX_AGE_SECONDS``
  (the main loop, leader election and, while leading, the command poll loop). A loop that stops ticking is stuck:
  the kubelet restarts the container.
- ``/readyz`` (readiness probe): the leader state is known (one election round went through), the Kubernetes API
  was reached within ``READINESS_MAX_AGE_SECONDS``, and, on the leader, SQS too (a standby does not poll SQS, so
  it is ready without it). A standby is ready: the PodDisruptionBudget counts it as a healthy replica.
- ``/metrics``: ``agent.metrics.AgentMetrics`` in the Prometheus text format.

Both probes answer 200 with ``ok`` or 503 with one problem per line. ``liveness`` and ``readiness`` are pure
functions of a ``HealthSnapshot``; ``Health`` records the facts (thread-safe) and ``HealthServer`` serves them
(stdlib ``http.server`` in a daemon thread).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from agent.metrics import CONTENT_TYPE, AgentMetrics

log = logging.getLogger(__name__)

KUBERNETES = "kubernetes"
SQS = "sqs"


@dataclass(frozen=True)
class HealthSnapshot:
    """The facts the probes judge (times are ``time.monotonic()`` seconds).

    Attributes:
        beats: loop name -> last tick.
        reached: dependency (``kubernetes``, ``sqs``) -> last successful call.
        leader: True/False once an election round went through; None before (unknown).
    """

    beats: Mapping[str, float] = field(default_factory=dict)
    reached: Mapping[str, float] = field(default_factory=dict)
    leader: bool | None = None


@dataclass(frozen=True)
class ProbeVerdict:
    ok: bool
    problems: tuple[str, ...] = ()


def liveness(snapshot: HealthSnapshot, now: float, max_age_seconds: float) -> ProbeVerdict:
    """Alive when every registered loop ticked within ``max_age_seconds``. Pure.

    >>> liveness(HealthSnapshot(beats={"main": 0.0}), now=100.0, max_age_seconds=90).problems
    ('loop main silent for 100 s',)
    """
    problems = tuple(
        f"loop {name} silent for {now - at:.0f} s"
        for name, at in sorted(snapshot.beats.items())
        if now - at > max_age_seconds
    )
    return ProbeVerdict(not problems, problems)


def readiness(snapshot: HealthSnapshot, now: float, max_age_seconds: float) -> ProbeVerdict:
    """Ready when the leader state is known, Kubernetes was reached within ``max_age_seconds``, and, on the
    leader, SQS too. Pure."""
    problems = []
    if snapshot.leader is None:
        problems.append("leader state unknown")
    needed = [KUBERNETES] + ([SQS] if snapshot.leader else [])
    for dependency in needed:
        at = snapshot.reached.get(dependency)
        if at is None:
            problems.append(f"{dependency} not reached yet")
        elif now - at > max_age_seconds:
            problems.append(f"{dependency} not reached for {now - at:.0f} s")
    return ProbeVerdict(not problems, tuple(problems))


class Health:
    """Thread-safe recorder of the facts in ``HealthSnapshot``.

    Args:
        clock: monotonic seconds; injectable for tests.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._beats: dict[str, float] = {}
        self._reached: dict[str, float] = {}
        self._leader: bool | None = None

    def beat(self, loop: str) -> None:
        """``loop`` is alive (registers it on its first tick)."""
        with self._lock:
            self._beats[loop] = self.clock()

    def retire(self, loop: str) -> None:
        """``loop`` ended on purpose (shutdown): stop judging it."""
        with self._lock:
            self._beats.pop(loop, None)

    def reached(self, dependency: str) -> None:
        """A call to ``dependency`` (``KUBERNETES``, ``SQS``) just succeeded."""
        with self._lock:
            self._reached[dependency] = self.clock()

    def set_leader(self, leader: bool) -> None:
        with self._lock:
            self._leader = leader

    def snapshot(self) -> HealthSnapshot:
        with self._lock:
            return HealthSnapshot(dict(self._beats), dict(self._reached), self._leader)


class HealthServer:
    """Serves ``/healthz``, ``/readyz`` and ``/metrics`` on ``host:port`` from a daemon thread.

    Args:
        health: the facts.
        metrics: what ``/metrics`` renders.
        port: TCP port; 0 picks a free one (see ``port`` after ``start``).
        liveness_max_age_seconds, readiness_max_age_seconds: the probes' limits.
        host: bind address (all interfaces by default: the kubelet probes the pod IP).
    """

    def __init__(
        self,
        health: Health,
        metrics: AgentMetrics,
        port: int,
        liveness_max_age_seconds: float,
        readiness_max_age_seconds: float,
        host: str = "0.0.0.0",
    ) -> None:
        self.health = health
        self.metrics = metrics
        self.liveness_max_age_seconds = liveness_max_age_seconds
        self.readiness_max_age_seconds = readiness_max_age_seconds
        self._server = ThreadingHTTPServer((host, port), self._handler())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> HealthServer:
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.5}, name="http", daemon=True
        )
        self._thread.start()
        log.info("health and metrics endpoint listening port=%d", self.port)
        return self

    def stop(self) -> None:
        """Stop serving (returns within the poll interval) and close the socket."""
        self._server.shutdown()
        self._server.server_close()

    def answer(self, path: str) -> tuple[int, str, bytes]:
        """(HTTP status, content type, body) for a GET of ``path``."""
        now = self.health.clock()
        if path == "/metrics":
            return 200, CONTENT_TYPE, self.metrics.render()
        if path in ("/healthz", "/readyz"):
            snapshot = self.health.snapshot()
            verdict = (
                liveness(snapshot, now, self.liveness_max_age_seconds)
                if path == "/healthz"
                else readiness(snapshot, now, self.readiness_max_age_seconds)
            )
            body = "ok\n" if verdict.ok else "".join(f"{p}\n" for p in verdict.problems)
            return (200 if verdict.ok else 503), "text/plain; charset=utf-8", body.encode()
        return 404, "text/plain; charset=utf-8", b"not found\n"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                status, content_type, body = server.answer(self.path.split("?", 1)[0])
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                log.debug("http %s", format % args)

        return Handler
