"""The simulated command queue on simulated time: redelivery after the visibility timeout, receipt handles, the
12-hour visibility limit, retention and the dead-letter queue (contract with moto: aws_contract/test_sqs.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from core.exceptions import AwsRequestError
from core.model import Command, CommandKind
from sim.faults import Faults
from sim.kernel import Kernel
from sim.sqs import SimQueue


def queue() -> tuple[Kernel, SimQueue]:
    kernel = Kernel(3)
    return kernel, SimQueue(kernel, Faults(kernel))


def command(n: int) -> Command:
    return Command(
        command_id=f"spot-{n}",
        cluster="demo",
        kind=CommandKind.CORDON,
        instance_id="i-0a1b2c3d4e5f60718",
        deadline=datetime(2030, 1, 1, tzinfo=UTC),
    )


def test_a_message_comes_back_when_its_visibility_lapses():
    kernel, q = queue()
    q.send_command(command(1))
    [first] = q.receive(10, 20, 30)
    kernel.run(29)
    assert q.receive(10, 20, 30) == []
    assert [m.message_id for m in q.in_flight()] == [first["MessageId"]]
    kernel.run(30)
    [again] = q.receive(10, 20, 30)
    assert again["MessageId"] == first["MessageId"] and again["ReceiptHandle"] != first["ReceiptHandle"]
    q.delete(first["ReceiptHandle"])  # an older handle: succeeds, deletes nothing
    assert len(q.messages) == 1
    with pytest.raises(AwsRequestError) as info:
        q.set_visibility(first["ReceiptHandle"], 60)
    assert info.value.code == "InvalidParameterValue"
    q.delete(again["ReceiptHandle"])
    assert q.messages == {}


def test_visibility_ends_within_twelve_hours_of_the_receive_and_only_in_flight():
    kernel, q = queue()
    q.send_command(command(1))
    [message] = q.receive(1, 0, 30)
    kernel.run(20)
    q.set_visibility(message["ReceiptHandle"], 43200 - 20)
    with pytest.raises(AwsRequestError) as info:
        q.set_visibility(message["ReceiptHandle"], 43200 - 19)
    assert info.value.code == "InvalidParameterValue"
    kernel.run(43200)
    with pytest.raises(AwsRequestError) as info:
        q.set_visibility(message["ReceiptHandle"], 30)
    assert info.value.code == "AWS.SimpleQueueService.MessageNotInflight"


def test_receives_take_up_to_ten_in_send_order_and_old_messages_expire():
    kernel, q = queue()
    ids = [q.send_command(command(n)) for n in range(12)]
    assert [m["MessageId"] for m in q.receive(10, 0, 60)] == ids[:10]
    assert [m["MessageId"] for m in q.receive(10, 0, 60)] == ids[10:]
    kernel.run(86400)
    assert q.receive(10, 0, 60) == [] and len(q.expired) == 12


def test_the_fourth_receive_moves_the_message_to_the_dead_letter_queue():
    _, q = queue()
    q.send_command(command(1))
    for count in ("1", "2", "3"):
        [m] = q.receive(10, 0, 0)
        assert m["Attributes"]["ApproximateReceiveCount"] == count
    assert q.receive(10, 0, 0) == []
    assert [Command.model_validate_json(m.body).command_id for m in q.dead_letters] == ["spot-1"]


def test_a_long_poll_learns_when_a_message_is_visible_next():
    """What a receiver's long poll waits for: ``next_visible`` (the earliest visible message, a visibility timeout's
    end) and the news of a send or a ChangeMessageVisibility (``listen``); a refused call tells nothing."""
    kernel, q = queue()
    told: list[float] = []
    q.listen(told.append)
    assert q.next_visible() is None
    kernel.run(5)
    q.send_command(command(1))
    assert told == [5.0] and q.next_visible() == 0.0  # visible now (0: never received)
    [message] = q.receive(10, 20, 30)
    assert q.next_visible() == 35.0 and told == [5.0]  # a receive makes nothing visible
    q.set_visibility(message["ReceiptHandle"], 12)
    assert told == [5.0, 17.0] and q.next_visible() == 17.0
    with pytest.raises(AwsRequestError):
        q.set_visibility(message["ReceiptHandle"], 43201)
    assert told == [5.0, 17.0]
    q.delete(message["ReceiptHandle"])
    assert q.next_visible() is None
