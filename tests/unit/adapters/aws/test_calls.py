"""The one AWS call wrapper: errors translated by cause, raised from the botocore error."""

from __future__ import annotations

import pytest
from botocore.exceptions import EndpointConnectionError

from adapters.aws.calls import RETRYABLE_CODES, call, call_unless_gone, translate
from core.exceptions import AwsRequestError, AwsUnavailableError, RetryableError
from tests.unit.adapters.aws.raising import Raising, client_error


@pytest.mark.parametrize(
    ("code", "status", "retryable"),
    [
        ("Throttling", 400, True),
        ("RequestLimitExceeded", 400, True),
        ("ResourceContention", 500, True),
        ("InternalFailure", 500, True),
        ("SomethingNew", 503, True),
        ("AccessDenied", 403, False),
        ("ValidationError", 400, False),
        ("UnauthorizedOperation", 403, False),
    ],
)
def test_errors_are_translated_by_cause(code, status, retryable):
    err = translate("DetachInstances", client_error(code, "text", status))
    assert isinstance(err, AwsUnavailableError if retryable else AwsRequestError)
    assert isinstance(err, RetryableError) is retryable
    assert err.operation == "DetachInstances" and err.code == code
    assert "DetachInstances" in str(err) and code in str(err)


def test_connection_failures_are_retryable():
    err = EndpointConnectionError(endpoint_url="https://autoscaling")
    with pytest.raises(AwsUnavailableError) as info:
        call("DescribeAutoScalingInstances", Raising(err).describe_auto_scaling_instances, InstanceIds=["i-1"])
    assert isinstance(info.value.__cause__, EndpointConnectionError)


def test_a_gone_answer_is_a_result_and_other_answers_are_raised_from_the_botocore_error():
    gone = client_error("ValidationError", "not part of the group")
    assert call_unless_gone("Op", Raising(gone).op, lambda code, message: "not part of" in message) is None
    other = client_error("AccessDenied", "no", 403)
    with pytest.raises(AwsRequestError) as info:
        call_unless_gone("Op", Raising(other).op, lambda code, message: "not part of" in message)
    assert info.value.__cause__ is other


def test_dynamodb_throttling_is_in_the_one_retryable_list():
    assert {"ProvisionedThroughputExceededException", "ThrottlingException", "Throttling"} <= RETRYABLE_CODES


def test_an_answer_botocore_cannot_parse_is_retryable_and_cut_short():
    from botocore.parsers import ResponseParserError

    def unreadable() -> None:
        raise ResponseParserError("Unable to parse response (unclosed token), invalid XML received: " + "<html>" * 500)

    with pytest.raises(AwsUnavailableError) as caught:
        call("DescribeInstances", unreadable)
    assert caught.value.code == "ResponseParserError" and isinstance(caught.value.__cause__, ResponseParserError)
    assert len(str(caught.value)) < 700
