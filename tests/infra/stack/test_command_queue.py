"""The command queue (its dead-letter queue after three receives, only the three Lambdas' roles may send) and every
queue of the stack encrypted and refusing plain HTTP."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Template

from tests.infra.conftest import as_list
from tests.infra.stack.resources import queue_ids

pytestmark = pytest.mark.slow  # the package's one synth (tests/infra/stack/conftest.py): several seconds


def test_command_queue_redrives_to_its_dead_letter_queue_after_three_receives(template: Template) -> None:
    queue_id, dlq_id = queue_ids(template)
    resources = template.to_json()["Resources"]
    assert resources[queue_id]["Properties"]["RedrivePolicy"]["maxReceiveCount"] == 3
    assert resources[dlq_id]["Type"] == "AWS::SQS::Queue"
    assert dlq_id != queue_id


def test_every_queue_is_encrypted_and_refuses_plain_http(template: Template) -> None:
    queues = template.find_resources("AWS::SQS::Queue")
    assert len(queues) == 5  # commands, their DLQ, the interruption, replenisher and refresher rules' DLQs
    for queue in queues.values():
        assert queue["Properties"].get("SqsManagedSseEnabled") is True or "KmsMasterKeyId" in queue["Properties"]
    secured = set()
    for policy in template.find_resources("AWS::SQS::QueuePolicy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if statement["Effect"] == "Deny" and statement.get("Condition") == {
                "Bool": {"aws:SecureTransport": "false"}
            }:
                secured.add(statement["Resource"]["Fn::GetAtt"][0])
    assert secured == set(queues)


def test_only_the_three_lambdas_roles_may_send_commands(template: Template) -> None:
    queue_id, _ = queue_ids(template)
    lambda_roles = [
        function["Properties"]["Role"]
        for function in template.find_resources("AWS::Lambda::Function").values()
        if function["Properties"]["Handler"].startswith("lambdas.")
    ]
    assert len(lambda_roles) == 3
    denials = [
        (policy["Properties"]["Queues"], statement)
        for policy in template.find_resources("AWS::SQS::QueuePolicy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if statement["Effect"] == "Deny" and "sqs:SendMessage" in as_list(statement["Action"])
    ]
    assert len(denials) == 1, denials
    queues, statement = denials[0]
    assert queues == [{"Ref": queue_id}]  # the command queue; SQS itself moves messages to the DLQ
    assert statement["Principal"] == {"AWS": "*"}
    assert statement["Resource"] == {"Fn::GetAtt": [queue_id, "Arn"]}
    allowed = statement["Condition"]["ArnNotEquals"]["aws:PrincipalArn"]
    assert sorted(map(str, allowed)) == sorted(map(str, lambda_roles))
