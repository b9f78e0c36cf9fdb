"""How a failed ReceiveMessage is logged (``agent.consumer.loop.log_receive_failure``): a transient refusal in one
line, anything else with its traceback."""

from __future__ import annotations

import logging

import pytest

from agent.consumer.loop import log_receive_failure
from core.exceptions import AwsRequestError, AwsUnavailableError


def _raised(err: Exception) -> Exception:
    try:
        raise err
    except Exception as caught:  # noqa: BLE001 - the test logs from inside the handler, as the loop does
        log_receive_failure(caught, 2.0, 2)
        return caught


def test_a_throttled_receive_is_one_warning_line_with_its_message(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="agent.consumer"):
        _raised(AwsUnavailableError("ReceiveMessage", "ThrottlingException", "Rate exceeded"))
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    assert record.exc_info is None
    assert "consecutive_failures=2: ReceiveMessage: ThrottlingException Rate exceeded" in record.getMessage()


def test_a_refusal_retrying_cannot_fix_keeps_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="agent.consumer"):
        _raised(AwsRequestError("ReceiveMessage", "AWS.SimpleQueueService.NonExistentQueue"))
    (record,) = caplog.records
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None
    assert "receive failed, backing off seconds=2.0 consecutive_failures=2" in record.getMessage()
