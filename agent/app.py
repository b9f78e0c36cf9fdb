"""The agent process: builds the clients from the settings, runs the membership reporter and the command consumer
in threads, and stops cleanly on SIGTERM or SIGINT.

Configuration (read once, at start):

- ``AgentSettings`` from the environment (``CLUSTER_NAME``, ``TABLE_NAME``, ``QUEUE_URL``, ... see core/settings/).
- Kubernetes: the file named by ``KUBECONFIG`` when set (``kubernetes.config.load_kube_config``), else the pod's
  service account (``load_incluster_config``).
- AWS: the default credential chain and region (``AWS_REGION``); ``AWS_ENDPOINT_URL`` points every client at
  another endpoint (the SDK reads it natively; the local world uses it for its moto server).

Leader election (``LEADER_ELECTION``, on by default; agent/leader.py): every replica serves its probes and
campaigns for the Lease; only the leader runs the consumer and the membership reporter. A replica that loses
leadership (it could not renew within the renew deadline, or another took the Lease) stops working, hands its
in-flight commands back and exits 1, so Kubernetes restarts it as a fresh standby (controller-runtime does the
same).

Shutdown on SIGTERM/SIGINT: polling stops (within ``SQS_WAIT_SECONDS``), in-flight commands get
``AGENT_SHUTDOWN_GRACE_SECONDS`` to finish, the rest are handed back to another agent (see agent/consumer/),
the Lease is released (a standby takes over at its next read, ``LEADER_ELECTION_RETRY_SECONDS``), then the process
exits 0. The pod's ``terminationGracePeriodSeconds`` must exceed SQS_WAIT_SECONDS + AGENT_SHUTDOWN_GRACE_SECONDS
plus a few seconds (agent/deploy/manager/deployment.yaml: 30 > 10 + 10).

Exit codes: 0 after SIGTERM/SIGINT, 1 after leadership was lost, 2 for invalid settings or Kubernetes
configuration.

Health and metrics: ``/healthz``, ``/readyz`` and ``/metrics`` on ``AGENT_HTTP_PORT`` (agent/health.py,
agent/metrics.py). Logs: JSON lines on stderr (``LOG_FORMAT``, agent/logs.py).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from adapters.aws.autoscaling import AutoScaling
from adapters.aws.clients import agent_config, clients, new_session
from adapters.aws.cloudwatch import MetricSink
from adapters.aws.events import EventBus
from adapters.aws.sqs import CommandQueue
from adapters.dynamo.controlplane import ControlPlaneSlots
from adapters.dynamo.store import Store
from agent import logs
from agent.cloudwatch import CloudWatchPublisher
from agent.consumer.config import ConsumerConfig
from agent.consumer.loop import CommandConsumer
from agent.controlplane import TableControlPlaneGuard
from agent.cordons.releaser import CordonReleaser
from agent.drain.engine import DrainEngine
from agent.events import NodeEventRecorder
from agent.health import KUBERNETES, Health, HealthServer
from agent.hooks import HookFinisher
from agent.kube.client import KubeAdapter, kube_configuration, make_api_client
from agent.kube.ratelimit import TokenBucket
from agent.leader import LeaderElector
from agent.membership import MembershipReporter
from agent.metrics import AgentMetrics, CountingEvictions
from agent.ready import ReadyReporter
from agent.report import Reporter
from core.exceptions import SettingsError
from core.settings import AgentSettings

log = logging.getLogger("agent")

LOG_FORMAT = logs.TEXT_FORMAT
MAIN_TICK_SECONDS = 1.0
EXIT_OK, EXIT_LEADERSHIP_LOST, EXIT_BAD_SETTINGS = 0, 1, 2


def worker_identity() -> str:
    """This process's identity in ``CMD#`` items: ``<hostname>:<pid>`` (the hostname is the pod's name)."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class Agent:
    """The agent's loops and how to start and stop them.

    Attributes:
        consumer, membership: the leader's two loops.
        cordons: the leader's third loop, giving back cordons after their quiet period (agent/cordons/; None: off).
        ready: the leader's "Node Ready" reports (agent/ready.py), flushed by a loop of their own (None: off).
        poll_wait_seconds: the consumer's long-poll wait (how long stopping its loop may take).
        elector: leader election; None runs as the only replica (``LEADER_ELECTION=false``).
        health: the probes' facts; server: the HTTP endpoint (None: no endpoint, e.g. in unit tests).
        metrics: Prometheus metrics (the ``leader`` gauge is set here).
    """

    consumer: CommandConsumer
    membership: MembershipReporter
    poll_wait_seconds: float
    elector: LeaderElector | None = None
    cordons: CordonReleaser | None = None
    ready: ReadyReporter | None = None
    health: Health = field(default_factory=Health)
    server: HealthServer | None = None
    metrics: AgentMetrics | None = None

    def run(self, stop: threading.Event) -> int:
        """Serve the probes, campaign, work while leading, until ``stop`` is set or leadership is lost; then
        shut down (see the module docstring). Returns the exit code."""
        if self.server is not None:
            self.server.start()
        work_stop = threading.Event()
        # the election goes on (renewing) until the work has stopped, so no standby starts before the hand-back
        election_stop = threading.Event()
        election = None
        if self.elector is not None:
            election = threading.Thread(
                target=self.elector.run,
                args=(election_stop,),
                kwargs={"tick": lambda: self.health.beat("leader-election")},
                name="leader-election",
                daemon=True,
            )
            election.start()
        else:
            self.leadership_changed(True)
        workers: list[threading.Thread] = []
        lost = False
        log.info("agent running")
        while True:
            self.health.beat("main")
            if not workers and self.leading():
                workers = self._start_workers(work_stop)
            if self.elector is not None and self.elector.lost.is_set():
                lost = True
                log.error("leadership lost: stopping work, the process exits for a restart as a standby")
                break
            if stop.wait(MAIN_TICK_SECONDS):
                break
        log.info("agent stopping")
        work_stop.set()
        if workers:
            self._stop_workers(workers)
        if self.elector is not None:
            election_stop.set()
            if election is not None:
                election.join(timeout=self.elector.retry_seconds + 12)
            self.elector.release()
        if self.server is not None:
            self.server.stop()
        log.info("agent stopped")
        return EXIT_LEADERSHIP_LOST if lost else EXIT_OK

    def leading(self) -> bool:
        return self.elector is None or self.elector.leading.is_set()

    def leadership_changed(self, leading: bool) -> None:
        """Record the leader state for the readiness probe and the ``leader`` gauge."""
        self.health.set_leader(leading)
        if self.metrics is not None:
            self.metrics.leader.set(1 if leading else 0)
        log.info("leader state leading=%s", leading)

    def _start_workers(self, work_stop: threading.Event) -> list[threading.Thread]:
        membership = threading.Thread(target=self.membership.run, args=(work_stop,), name="membership", daemon=True)
        consumer = threading.Thread(target=self.consumer.run, args=(work_stop,), name="consumer", daemon=True)
        membership.start()
        consumer.start()
        log.info("leading: consuming commands and reporting membership")
        workers = [membership, consumer]
        if self.cordons is not None:
            cordons = threading.Thread(target=self.cordons.run, args=(work_stop,), name="cordons", daemon=True)
            cordons.start()
            workers.append(cordons)
        if self.ready is not None:
            ready = threading.Thread(target=self.ready.run, args=(work_stop,), name="ready-events", daemon=True)
            ready.start()
            workers.append(ready)
        return workers

    def _stop_workers(self, workers: list[threading.Thread]) -> None:
        membership, consumer = workers[:2]
        self.membership.close()
        consumer.join(timeout=self.poll_wait_seconds + 5)
        self.consumer.shutdown()
        membership.join(timeout=2)
        for other in workers[2:]:  # the cordon releaser and the Ready reports end at their next wait
            other.join(timeout=5)


def build_agent(settings: AgentSettings, environ: Mapping[str, str], session: Any = None) -> Agent:
    """Build every client and part of the agent from the settings (no I/O beyond loading configuration).

    Raises:
        SettingsError: the Kubernetes configuration cannot be loaded, or no AWS region is configured.
    """
    kube = KubeAdapter(
        make_api_client(kube_configuration(environ), pool_maxsize=settings.concurrency * 8 + 8),
        limiter=TokenBucket(settings.kube_qps, settings.kube_burst),
    )
    metrics = AgentMetrics()
    health = Health()
    identity = worker_identity()

    session = session or new_session()
    names = ("sqs", "events", "autoscaling", "dynamodb") + (("cloudwatch",) if settings.cloudwatch_metrics else ())
    aws = clients(session, names, agent_config(settings.concurrency, settings.poll_wait_seconds))
    queue, events = CommandQueue(aws["sqs"], settings.queue_url), aws["events"]
    autoscaling = AutoScaling(aws["autoscaling"])
    store = Store(aws["dynamodb"].Table(settings.table_name), settings.cluster_name)
    sink = MetricSink(aws["cloudwatch"], settings.cloudwatch_namespace) if "cloudwatch" in aws else None
    alarms = CloudWatchPublisher(sink, settings.cluster_name)

    recorder = NodeEventRecorder(kube)
    guard = TableControlPlaneGuard(
        ControlPlaneSlots(store),
        settings.max_control_plane_drains,
        identity,
        settings.max_command_seconds,
        on_error=lambda err: metrics.loop_error("consumer", err),
    )  # at most MAX_CONTROL_PLANE_DRAINS control-plane drains in the whole cluster (agent/controlplane.py)
    engine = DrainEngine(CountingEvictions(kube, metrics), settings, events=recorder, guard=guard)
    reporter = Reporter(store, events, settings.event_bus_name, post_node_event=recorder)
    hooks = HookFinisher(store, autoscaling, identity, metrics)
    consumer = CommandConsumer(
        queue,
        store,
        engine,
        reporter,
        ConsumerConfig.from_settings(settings, identity),
        metrics=metrics,
        health=health,
        hooks=hooks,
        alarms=alarms,
    )

    def on_resync(nodes: int) -> None:
        health.reached(KUBERNETES)
        metrics.membership_nodes.set(nodes)
        alarms.membership_reported(nodes)

    membership = MembershipReporter.from_settings(settings, kube, store, autoscaling, on_resync=on_resync)
    membership.on_error = lambda err: metrics.loop_error("membership", err)
    ready = None
    if settings.ready_events:
        ready = ReadyReporter(
            EventBus(events, settings.event_bus_name), settings.cluster_name, settings.ready_event_seconds
        )
        membership.on_ready = ready.note
    server = HealthServer(
        health, metrics, settings.http_port, settings.liveness_max_age_seconds, settings.readiness_max_age_seconds
    )
    agent = Agent(consumer, membership, settings.poll_wait_seconds, health=health, server=server, metrics=metrics)
    agent.cordons = CordonReleaser(store, engine, settings.cordon_check_seconds, metrics=metrics)
    agent.ready = ready
    if settings.leader_election:
        agent.elector = LeaderElector(
            kube,
            settings.leader_election_namespace,
            settings.leader_election_lease_name,
            identity,
            lease_seconds=settings.lease_duration_seconds,
            renew_deadline_seconds=settings.renew_deadline_seconds,
            retry_seconds=settings.retry_period_seconds,
            on_change=agent.leadership_changed,
            on_api_reached=lambda: health.reached(KUBERNETES),
        )
    return agent


def main(environ: Mapping[str, str] | None = None) -> int:
    """Entry point of ``python -m agent``; returns the exit code."""
    env = os.environ if environ is None else environ
    level = env.get("LOG_LEVEL", "INFO")
    try:
        settings: AgentSettings = AgentSettings.from_env(env)
    except SettingsError as err:
        logs.configure(level, "json", sys.stderr)
        log.error("cannot start: %s", err)
        return EXIT_BAD_SETTINGS
    logs.configure(level, settings.log_format, sys.stderr)
    try:
        agent = build_agent(settings, env)
    except (SettingsError, OSError) as err:  # OSError: the HTTP port cannot be bound
        log.error("cannot start: %s", err)
        return EXIT_BAD_SETTINGS
    stop = threading.Event()

    def _on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    log.info(
        "agent starting cluster=%s queue=%s table=%s bus=%s",
        settings.cluster_name,
        settings.queue_url,
        settings.table_name,
        settings.event_bus_name,
    )
    return agent.run(stop)
