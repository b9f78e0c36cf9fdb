"""Every AWS call the Lambdas make, answered by a body botocore cannot parse (an HTML page from a proxy or a load
balancer): each raises one of the project's exceptions (retryable for the XML services, whose parser gives up), never
a botocore type that would escape the handlers' error handling.

The server is a real HTTP server on 127.0.0.1 answering every request with the same status and an unclosed HTML
page; the clients are real boto3 clients with one attempt (no retries, so each case is one request).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.config import Config

from adapters.aws.autoscaling import AutoScaling
from adapters.aws.ec2 import Ec2
from adapters.aws.sqs import CommandQueue
from adapters.dynamo.table import Table
from core.exceptions import AwsRequestError, AwsUnavailableError, NodeManagerError, StoreUnavailableError
from core.lifecycle import LifecycleAction
from core.model import Command, CommandKind
from tests.integration.garbage_server import Garbage

INSTANCE = "i-0123456789abcdef0"


def session() -> boto3.session.Session:
    return boto3.session.Session(aws_access_key_id="x", aws_secret_access_key="x", region_name="us-east-1")


@pytest.fixture(scope="module")
def made(endpoint: str) -> dict[str, Any]:
    return clients(endpoint)


def clients(endpoint: str) -> dict[str, Any]:
    config = Config(retries={"max_attempts": 1, "mode": "standard"}, connect_timeout=2, read_timeout=5)
    s = session()
    made = {name: s.client(name, endpoint_url=endpoint, config=config) for name in ("autoscaling", "ec2", "sqs")}
    made["table"] = s.resource("dynamodb", endpoint_url=endpoint, config=config).Table("state")
    return made


def command() -> Command:
    return Command(
        command_id="spot-e1",
        cluster="demo.k8s.local",
        kind=CommandKind.DRAIN,
        instance_id=INSTANCE,
        reason="spot-interruption:terminate",
        deadline=datetime.now(UTC) + timedelta(seconds=120),
    )


ACTION = LifecycleAction(
    hook_name="node-manager-drain", asg_name="nodes", token="a1b2c3d4-e5f6-4a5b-8c9d-0e1f2a3b4c5d", instance_id=INSTANCE
)

# (name, service, call): every AWS call of the interruption Lambda, the replenisher and the refresher
XML_CALLS: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
    ("DescribeAutoScalingGroups (cluster)", lambda c: AutoScaling(c["autoscaling"]).cluster_groups("demo.k8s.local")),
    ("DescribeAutoScalingGroups (one)", lambda c: AutoScaling(c["autoscaling"]).describe_group("nodes")),
    ("DescribeAutoScalingInstances", lambda c: AutoScaling(c["autoscaling"]).membership(INSTANCE)),
    ("DescribeAutoScalingInstances (many)", lambda c: AutoScaling(c["autoscaling"]).group_names([INSTANCE])),
    ("UpdateAutoScalingGroup", lambda c: AutoScaling(c["autoscaling"]).set_capacity("nodes", 3, 4)),
    ("TerminateInstanceInAutoScalingGroup", lambda c: AutoScaling(c["autoscaling"]).terminate_in_group(INSTANCE, True)),
    ("DetachInstances", lambda c: AutoScaling(c["autoscaling"]).detach_instance(INSTANCE, "nodes")),
    ("CompleteLifecycleAction", lambda c: AutoScaling(c["autoscaling"]).complete_lifecycle_action(ACTION)),
    ("DescribeInstances (known)", lambda c: Ec2(c["ec2"]).instance_known(INSTANCE)),
    ("DescribeInstances (launch times)", lambda c: Ec2(c["ec2"]).launch_times([INSTANCE])),
    ("DescribeLaunchTemplates", lambda c: Ec2(c["ec2"]).template_versions(["lt-0123456789abcdef0"])),
]
JSON_CALLS: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
    (
        "SendMessage",
        lambda c: CommandQueue(c["sqs"], "https://sqs.us-east-1.amazonaws.com/1/q").send_command(command()),
    ),
    ("GetItem", lambda c: Table(c["table"], "demo").get("LOCK")),
    ("Query", lambda c: list(Table(c["table"], "demo").query_partition())),
    ("PutItem", lambda c: Table(c["table"], "demo").put("LOCK", {"holder": "x"})),
    ("DeleteItem", lambda c: Table(c["table"], "demo").delete("LOCK")),
]


@pytest.mark.parametrize("status", [200, 400])
@pytest.mark.parametrize(("name", "make_call"), XML_CALLS, ids=[n for n, _ in XML_CALLS])
def test_an_unparseable_answer_from_ec2_or_auto_scaling_is_a_retryable_error(
    made: dict[str, Any], status: int, name: str, make_call: Callable[[dict[str, Any]], Any]
) -> None:
    Garbage.status = status
    with pytest.raises(AwsUnavailableError) as caught:
        make_call(made)
    assert caught.value.code == "ResponseParserError" and "Unable to parse" in str(caught.value)


@pytest.mark.parametrize(
    ("name", "make_call"),
    [c for c in JSON_CALLS if c[0] in ("SendMessage", "Query")],
    ids=["SendMessage", "Query"],
)
def test_a_json_answer_that_is_not_json_never_passes_for_a_sent_message_or_an_empty_partition(
    made: dict[str, Any], name: str, make_call: Callable[[dict[str, Any]], Any]
) -> None:
    """botocore reads a 200 whose body is not JSON as an empty answer. GetItem cannot tell it from "no item" (the
    same empty answer) and PutItem/DeleteItem answer nothing: those are not checked."""
    Garbage.status = 200
    with pytest.raises((AwsUnavailableError, StoreUnavailableError)):
        make_call(made)


@pytest.mark.parametrize("status", [400, 500, 502])
@pytest.mark.parametrize(("name", "make_call"), XML_CALLS + JSON_CALLS, ids=[n for n, _ in XML_CALLS + JSON_CALLS])
def test_an_error_status_with_an_unparseable_body_raises_the_projects_exceptions(
    made: dict[str, Any], status: int, name: str, make_call: Callable[[dict[str, Any]], Any]
) -> None:
    Garbage.status = status
    expected: tuple[type[NodeManagerError], ...] = (AwsUnavailableError, StoreUnavailableError)
    if status < 500:
        expected += (AwsRequestError,)
    with pytest.raises(expected):
        make_call(made)
