"""AWS for the local world: moto as a server on 127.0.0.1, shared by the test process and every spawned process.

Spawned processes (Lambda handlers, the agent) find it through ``AWS_ENDPOINT_URL``, which boto3 honours for every
service (https://docs.aws.amazon.com/sdkref/latest/guide/feature-ss-endpoints.html).
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import urllib.request
from collections.abc import Callable
from typing import Any

import boto3
from moto.dynamodb.responses import DynamoHandler
from moto.server import ThreadedMotoServer

from localworld import aws_rules, dynamo_costs, spot_market
from localworld.kube_processes import free_port

ACCESS_KEY = "testing"
SECRET_KEY = "testing"
DEFAULT_REGION = "us-east-1"
WARM_UP_SERVICES = ("ec2", "autoscaling", "dynamodb", "sqs", "events")


def aws_env(endpoint_url: str, region: str = DEFAULT_REGION) -> dict[str, str]:
    """Environment variables that point boto3 (in any process) at the moto server with fake credentials."""
    return {
        "AWS_ENDPOINT_URL": endpoint_url,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_DEFAULT_REGION": region,
        "AWS_REGION": region,
        # no instance-metadata lookups, no shared config from the machine
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
    }


def session(endpoint_url: str, region: str = DEFAULT_REGION) -> WorldSession:
    """A boto3 session bound to the moto server (see ``WorldSession``)."""
    return WorldSession(endpoint_url, region)


def client(service: str, endpoint_url: str, region: str = DEFAULT_REGION, **kwargs: Any) -> Any:
    """A boto3 client for ``service`` on the moto server (fake credentials)."""
    return session(endpoint_url, region).client(service, **kwargs)


def resource(service: str, endpoint_url: str, region: str = DEFAULT_REGION, **kwargs: Any) -> Any:
    """A boto3 resource for ``service`` on the moto server (fake credentials)."""
    return session(endpoint_url, region).resource(service, **kwargs)


# One lock for every DynamoDB request moto serves in this process (see ``serialise_dynamodb``).
DYNAMODB_LOCK = threading.Lock()


def serialise_dynamodb() -> bool:
    """Make moto's DynamoDB serve one request at a time, in this process (idempotent).

    moto's server answers each request in its own thread, and its DynamoDB backend evaluates a write's condition and
    then applies the write with nothing between the two, so two conditional writers racing for one item can both win;
    DynamoDB itself applies each conditional write and each transaction atomically ("Condition expressions",
    "Amazon DynamoDB Transactions: How it works", DynamoDB Developer Guide). Wrapping ``DynamoHandler.call_action``
    (where moto runs every DynamoDB action, after parsing the request and before serialising the answer) in one lock
    gives every action, transactions included, that atomicity; the other services stay parallel. Requests queue for
    the lock, so the cost is latency under contention, not correctness. Served alone, moto's requests are then made
    to cost what they read and write, not the whole table (``localworld.dynamo_costs``; answers unchanged).

    Returns:
        True if it installed the lock now, False if it was installed already.
    """
    dynamo_costs.install(serialised)  # each request's cost that of its own items once they are served alone
    current = DynamoHandler.call_action
    if getattr(current, "serialised_by", None) is DYNAMODB_LOCK:
        return False
    DynamoHandler.call_action = _locked(current)  # type: ignore[method-assign]  # the point: wrap moto's handler
    return True


def serialised() -> bool:
    """Whether moto's DynamoDB serves one request at a time in this process now (``serialise_dynamodb`` installed and
    not taken away: ``localworld.lockrace.unserialised_dynamodb``)."""
    return getattr(DynamoHandler.call_action, "serialised_by", None) is DYNAMODB_LOCK


def _locked(call_action: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(call_action)
    def serialised(self: DynamoHandler) -> Any:
        with DYNAMODB_LOCK:
            return call_action(self)

    serialised.serialised_by = DYNAMODB_LOCK  # type: ignore[attr-defined]  # marks the wrapper as installed
    return serialised


class WorldSession:
    """A ``boto3.Session`` with fake credentials whose ``client``/``resource`` default to the moto endpoint.

    Attributes:
        boto: the underlying ``boto3.Session``.
        endpoint_url: the moto server's URL.
        region: the region name.
    """

    def __init__(self, endpoint_url: str, region: str = DEFAULT_REGION) -> None:
        self.endpoint_url = endpoint_url
        self.region = region
        self.boto = boto3.Session(aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY, region_name=region)

    def client(self, service: str, **kwargs: Any) -> Any:
        kwargs.setdefault("endpoint_url", self.endpoint_url)
        return self.boto.client(service, **kwargs)  # type: ignore[call-overload]  # name known at run time

    def resource(self, service: str, **kwargs: Any) -> Any:
        kwargs.setdefault("endpoint_url", self.endpoint_url)
        return self.boto.resource(service, **kwargs)  # type: ignore[call-overload]  # name known at run time


class MotoServer:
    """moto's ``ThreadedMotoServer`` on 127.0.0.1 at a free port (a thread of this process), with Auto Scaling made
    as strict as AWS where moto is laxer (``localworld.aws_rules``) and its DynamoDB made atomic
    (``serialise_dynamodb``).

    Attributes:
        endpoint_url: ``http://127.0.0.1:<port>`` once started.
    """

    def __init__(self, port: int | None = None, region: str = DEFAULT_REGION, atomic_dynamodb: bool = True) -> None:
        self.port = port or free_port()
        self.region = region
        self.atomic_dynamodb = atomic_dynamodb
        self.endpoint_url = f"http://127.0.0.1:{self.port}"
        self._server: ThreadedMotoServer | None = None

    def start(self) -> MotoServer:
        """Start the server (idempotent); returns when it accepts connections. Groups whose MixedInstancesPolicy is
        all Spot launch Spot Instances, as in AWS (``localworld.spot_market``).

        With ``atomic_dynamodb`` (the default) DynamoDB requests are served one at a time (``serialise_dynamodb``),
        so conditional writes and transactions are atomic as in DynamoDB; without it moto is left as it is (only
        to show what that costs: ``localworld.lockrace``).
        """
        if self.atomic_dynamodb:
            serialise_dynamodb()
        if self._server is None:
            aws_rules.install()  # answer as AWS does where moto is laxer (localworld.aws_rules)
            spot_market.install()  # all-Spot groups launch Spot Instances (localworld.spot_market)
            logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one access-log line per request otherwise
            self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
            self._server.start()
        return self

    def warm_up(self, services: tuple[str, ...] = WARM_UP_SERVICES) -> None:
        """One cheap call per service, so moto builds its backends (seconds for EC2) before a test needs them."""
        calls = {
            "ec2": lambda c: c.describe_instances(),
            "autoscaling": lambda c: c.describe_auto_scaling_groups(),
            "dynamodb": lambda c: c.list_tables(),
            "sqs": lambda c: c.list_queues(),
            "events": lambda c: c.list_rules(),
            "lambda": lambda c: c.list_functions(),
        }
        sess = self.session()
        for name in services:
            if name in calls:
                calls[name](sess.client(name))

    def stop(self) -> None:
        """Stop the server and join its thread (idempotent)."""
        if self._server is not None:
            self._server.stop()
            self._server = None

    def reset(self) -> None:
        """Forget every resource in every service (``POST /moto-api/reset``)."""
        req = urllib.request.Request(f"{self.endpoint_url}/moto-api/reset", method="POST", data=b"")
        with urllib.request.urlopen(req, timeout=30) as resp:
            resp.read()

    def env(self) -> dict[str, str]:
        return aws_env(self.endpoint_url, self.region)

    def session(self) -> WorldSession:
        return session(self.endpoint_url, self.region)

    def client(self, service: str, **kwargs: Any) -> Any:
        return self.session().client(service, **kwargs)

    def resource(self, service: str, **kwargs: Any) -> Any:
        return self.session().resource(service, **kwargs)

    def __enter__(self) -> MotoServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def moto_data(endpoint_url: str) -> dict[str, Any]:
    """moto's own view of its state (``GET /moto-api/data.json``), for debugging."""
    with urllib.request.urlopen(f"{endpoint_url}/moto-api/data.json", timeout=30) as resp:
        return dict(json.loads(resp.read()))
