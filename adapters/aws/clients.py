"""Building boto3 clients: one botocore ``Config`` per kind of process, and clients made on first use.

The Lambdas' calls must give up before the Lambda does: a connect or read that hangs would otherwise run into the
function's timeout (30 s for the interruption Lambda, the shortest) and the invocation would die without its
error. ``LAMBDA_CONFIG`` bounds each attempt (connect 3 s, read 10 s) and lets botocore retry throttling and
transient errors in its ``standard`` mode (3 attempts, exponential backoff with jitter).

``LazyClients`` builds a client the first time an attribute of it is used, so a Lambda pays (at cold start) only
for the clients its invocations actually call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import NoRegionError

from core.exceptions import SettingsError

# Loggers of the AWS SDK and its HTTP library: chatty at INFO, so processes quiet them to WARNING.
SDK_LOGGERS = ("botocore", "urllib3")

LAMBDA_CONNECT_TIMEOUT_SECONDS = 3
LAMBDA_READ_TIMEOUT_SECONDS = 10
# Attempts in all, the first call included (botocore's ``total_max_attempts``). Given as ``max_attempts`` (retries
# after the first), botocore rewrites the Config's ``retries`` dict in place into this form on first use.
LAMBDA_TOTAL_ATTEMPTS = 4


def client_config(
    *,
    connect_timeout: float = LAMBDA_CONNECT_TIMEOUT_SECONDS,
    read_timeout: float = LAMBDA_READ_TIMEOUT_SECONDS,
    total_attempts: int = LAMBDA_TOTAL_ATTEMPTS,
    max_pool_connections: int = 10,
) -> Config:
    """A botocore ``Config`` with the given per-attempt timeouts (seconds) and ``standard`` retries, ``total_attempts``
    calls at most (https://docs.aws.amazon.com/sdkref/latest/guide/feature-retry-behavior.html)."""
    return Config(
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        retries={"mode": "standard", "total_max_attempts": total_attempts},
        max_pool_connections=max_pool_connections,
    )


LAMBDA_CONFIG = client_config()

AGENT_CONNECT_TIMEOUT_SECONDS = 5
AGENT_TOTAL_ATTEMPTS = 6
AGENT_READ_MARGIN_SECONDS = 15  # a long poll (ReceiveMessage WaitTimeSeconds) answers after its wait: read longer


def agent_config(concurrency: int, poll_wait_seconds: int) -> Config:
    """The agent's ``Config``: a read timeout past the SQS long poll, 5 standard attempts, and a connection pool
    for its worker threads (``concurrency`` commands at once)."""
    return client_config(
        connect_timeout=AGENT_CONNECT_TIMEOUT_SECONDS,
        read_timeout=poll_wait_seconds + AGENT_READ_MARGIN_SECONDS,
        total_attempts=AGENT_TOTAL_ATTEMPTS,
        max_pool_connections=concurrency * 2 + 4,
    )


class LazyClient:
    """A stand-in for a boto3 client (or resource) that builds it on first attribute access, then delegates.

    Args:
        build: makes the client, e.g. ``lambda: session.client("ec2", config=LAMBDA_CONFIG)``.
    """

    def __init__(self, build: Callable[[], Any]) -> None:
        self._build = build
        self._client: Any = None
        self._lock = threading.Lock()

    @property
    def built(self) -> bool:
        """Whether the client was made (some attribute of it was used)."""
        return self._client is not None

    def __getattr__(self, name: str) -> Any:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = self._build()
        return getattr(self._client, name)


def new_session() -> boto3.session.Session:
    """A boto3 session with the default credential chain, region and endpoints (``AWS_ENDPOINT_URL``)."""
    return boto3.session.Session()


def clients(session: Any, names: tuple[str, ...], config: Config) -> dict[str, Any]:
    """Clients made now (a long-running process: a missing region shows at start), by service name; ``dynamodb`` is
    the DynamoDB resource.

    Raises:
        SettingsError: no AWS region is configured (``AWS_REGION``).
    """
    try:
        return {
            name: session.resource(name, config=config) if name == "dynamodb" else session.client(name, config=config)
            for name in names
        }
    except NoRegionError as err:
        raise SettingsError("AWS_REGION", str(err)) from err


def lazy_clients(session: Any, names: tuple[str, ...], config: Config = LAMBDA_CONFIG) -> dict[str, Any]:
    """``LazyClient`` per service name, built from ``session`` with ``config``; the name ``dynamodb`` gives the
    DynamoDB *resource* (the state table is used through ``Table``), ``dynamodb_client`` the low-level client."""

    def build(name: str) -> Callable[[], Any]:
        if name == "dynamodb":
            return lambda: session.resource("dynamodb", config=config)
        if name == "dynamodb_client":
            return lambda: session.client("dynamodb", config=config)
        return lambda: session.client(name, config=config)

    return {name: LazyClient(build(name)) for name in names}
