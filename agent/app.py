"""The agent process: builds the clients from the settings, runs the membership reporter and the command consumer
in threads, and stops cleanly on SIGTERM or SIGINT.

Configuration (read once, at start):

- ``AgentSettings`` from the environment (``CLUSTER_NAME``, ``TABLE_NAME``, ``QUEUE_URL``, ... see core/settings.py).
- Kubernetes: the file named by ``KUBECONFIG`` when set (``kubernetes.config.load_kube_config``), else the pod's
  service account (``load_incluster_config``).
- AWS: the default boto3 credential chain and region (``AWS_REGION``); ``AWS_ENDPOINT_URL`` points every client at
  another endpoint (boto3 >= 1.28 reads it natively; the local world uses it for its moto server).

Shutdown on SIGTERM/SIGINT: polling stops (within ``SQS_WAIT_SECONDS``), in-flight commands get
``AGENT_SHUTDOWN_GRACE_SECONDS`` to finish, the rest are handed back to another agent (see agent/consumer.py),
then the process exits 0. Exit code 2: invalid settings or Kubernetes configuration.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from types import FrameType
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import NoRegionError
from kubernetes import client, config

from agent.consumer import CommandConsumer, ConsumerConfig
from agent.drain import DrainEngine
from agent.events import NodeEventRecorder
from agent.kube import KubeAdapter, make_api_client
from agent.membership import MembershipReporter
from agent.report import Reporter
from core.exceptions import SettingsError
from core.settings import AgentSettings
from core.store import Store

log = logging.getLogger("agent")

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(threadName)s] %(message)s"


def worker_identity() -> str:
    """This process's identity in ``CMD#`` items: ``<hostname>:<pid>`` (the hostname is the pod's name)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def kube_configuration(environ: Mapping[str, str]) -> client.Configuration:
    """The Kubernetes client configuration: ``KUBECONFIG`` if set, else in-cluster.

    Raises:
        SettingsError: the kubeconfig cannot be loaded, or the process is not in a pod.
    """
    configuration = client.Configuration()
    path = environ.get("KUBECONFIG")
    try:
        if path:
            config.load_kube_config(config_file=path, client_configuration=configuration)
        else:
            config.load_incluster_config(client_configuration=configuration)
    except (config.ConfigException, OSError) as err:
        raise SettingsError("KUBECONFIG", f"cannot load the Kubernetes configuration: {err}") from err
    return configuration


@dataclass
class Agent:
    """The two loops of the agent and how to stop them."""

    consumer: CommandConsumer
    membership: MembershipReporter
    poll_wait_seconds: float

    def run(self, stop: threading.Event) -> None:
        """Run both loops until ``stop`` is set, then shut down (see the module docstring)."""
        membership = threading.Thread(target=self.membership.run, args=(stop,), name="membership", daemon=True)
        consumer = threading.Thread(target=self.consumer.run, args=(stop,), name="consumer", daemon=True)
        membership.start()
        consumer.start()
        log.info("agent running")
        while not stop.wait(1.0):
            pass
        log.info("agent stopping")
        self.membership.close()
        consumer.join(timeout=self.poll_wait_seconds + 5)
        self.consumer.shutdown()
        membership.join(timeout=2)
        log.info("agent stopped")


def build_agent(settings: AgentSettings, environ: Mapping[str, str], session: Any = None) -> Agent:
    """Build every client and part of the agent from the settings (no I/O beyond loading configuration).

    Raises:
        SettingsError: the Kubernetes configuration cannot be loaded, or no AWS region is configured.
    """
    kube = KubeAdapter(make_api_client(kube_configuration(environ), pool_maxsize=settings.concurrency * 8 + 8))

    session = session or boto3.session.Session()
    aws_config = Config(retries={"mode": "standard", "max_attempts": 5},
                        max_pool_connections=settings.concurrency * 2 + 4)
    try:
        sqs = session.client("sqs", config=aws_config)
        events = session.client("events", config=aws_config)
        autoscaling = session.client("autoscaling", config=aws_config)
        table = session.resource("dynamodb", config=aws_config).Table(settings.table_name)
    except NoRegionError as err:
        raise SettingsError("AWS_REGION", str(err)) from err
    store = Store(table, settings.cluster_name)

    recorder = NodeEventRecorder(kube)
    engine = DrainEngine(kube, settings, events=recorder)
    reporter = Reporter(store, events, settings.event_bus_name, post_node_event=recorder)
    consumer = CommandConsumer(sqs, store, engine, reporter, ConsumerConfig.from_settings(settings, worker_identity()))
    membership = MembershipReporter.from_settings(settings, kube, store, autoscaling)
    return Agent(consumer, membership, settings.poll_wait_seconds)


def main(environ: Mapping[str, str] | None = None) -> int:
    """Entry point of ``python -m agent``; returns the exit code."""
    env = os.environ if environ is None else environ
    logging.basicConfig(level=env.get("LOG_LEVEL", "INFO").upper(), format=LOG_FORMAT, stream=sys.stderr)
    logging.getLogger("botocore").setLevel(logging.WARNING)
    logging.getLogger("urllib3").setLevel(logging.WARNING)
    try:
        settings: AgentSettings = AgentSettings.from_env(env)
        agent = build_agent(settings, env)
    except SettingsError as err:
        log.error("cannot start: %s", err)
        return 2
    stop = threading.Event()

    def _on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    log.info("agent starting cluster=%s queue=%s table=%s bus=%s", settings.cluster_name, settings.queue_url,
             settings.table_name, settings.event_bus_name)
    agent.run(stop)
    return 0
