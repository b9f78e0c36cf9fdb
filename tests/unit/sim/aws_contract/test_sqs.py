"""SQS on both sides: a command delivered at least once then deleted, and redriven to the dead-letter queue after
``maxReceiveCount`` receives (the simulation's queue alone: ``tests/unit/sim/test_sqs.py``)."""

from __future__ import annotations

from core.model import Command
from tests.unit.sim.aws_contract.sides import Side, command, outcome


def test_a_command_is_delivered_at_least_once_then_deleted(side: Side):
    message_id = side.aws.queue.send_command(command("i-0a1b2c3d4e5f60718"))
    got = side.aws.queue.receive(10, 0, 30)
    assert [(m["MessageId"], m["Attributes"]["ApproximateReceiveCount"]) for m in got] == [(message_id, "1")]
    assert Command.model_validate_json(got[0]["Body"]).command_id == "spot-1"
    assert side.aws.queue.receive(10, 0, 30) == []  # invisible for 30 s
    side.aws.queue.set_visibility(got[0]["ReceiptHandle"], 0)
    again = side.aws.queue.receive(10, 0, 30)
    assert [m["Attributes"]["ApproximateReceiveCount"] for m in again] == ["2"]
    side.aws.queue.delete(again[0]["ReceiptHandle"])
    assert side.aws.queue.receive(10, 0, 0) == []
    assert outcome(lambda: side.aws.queue.receive(11, 0, 30)) == ("AwsRequestError", "InvalidParameterValue")
    assert outcome(lambda: side.aws.queue.delete("bogus")) == ("AwsRequestError", "ReceiptHandleIsInvalid")
    assert outcome(lambda: side.aws.queue.set_visibility("bogus", 5)) == ("AwsRequestError", "ReceiptHandleIsInvalid")


def test_a_message_received_max_receive_count_times_goes_to_the_dead_letter_queue(side: Side):
    side.aws.queue.send_command(command("i-0a1b2c3d4e5f60718"))
    counts = [m["Attributes"]["ApproximateReceiveCount"] for _ in range(4) for m in side.aws.queue.receive(10, 0, 0)]
    assert counts == ["1", "2", "3"]
    assert side.dead_letters() == 1
