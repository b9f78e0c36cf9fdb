"""One way to call an AWS API: botocore errors become ``core.exceptions`` types raised ``from`` the botocore error.

- ``AwsUnavailableError`` (retryable): an error code in ``RETRYABLE_CODES``, any HTTP 5xx answer, no answer at
  all (connection refused or reset, connect or read timeout), or an answer botocore cannot parse (an HTML page from
  a proxy or load balancer instead of the service's XML: ``botocore.parsers.ResponseParserError``, which is not a
  ``BotoCoreError`` and would otherwise escape every handler).
- ``AwsRequestError`` (not retryable): any other error answer (access denied, validation) or botocore error.

``RETRYABLE_CODES`` is the one list of retryable codes: the DynamoDB table (``adapters.dynamo.table``) uses it too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from botocore.exceptions import BotoCoreError, ClientError, ConnectionError, HTTPClientError
from botocore.parsers import ResponseParserError

from core.exceptions import AwsRequestError, AwsUnavailableError

T = TypeVar("T")

# Error codes worth retrying: AWS "Common Errors" for EC2 / Auto Scaling / SQS, DynamoDB's throughput and throttling
# errors, and Auto Scaling's ResourceContention ("already a pending update to an Auto Scaling resource").
RETRYABLE_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "RequestLimitExceeded",
        "RequestThrottled",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "ServiceUnavailable",
        "Unavailable",
        "InternalError",
        "InternalFailure",
        "InternalServerError",
        "ResourceContention",
        "RequestTimeout",
        "RequestTimeoutException",
    }
)

# botocore errors raised when no answer came (connection refused/reset, connect or read timeout).
CONNECTION_ERRORS: tuple[type[BotoCoreError], ...] = (ConnectionError, HTTPClientError)
MAX_UNPARSED_CHARS = 500  # botocore quotes the whole unreadable body; a log line needs the start only


def unparsed(err: ResponseParserError) -> str:
    """The parser's message, cut to ``MAX_UNPARSED_CHARS``. Pure."""
    text = str(err)
    return text if len(text) <= MAX_UNPARSED_CHARS else f"{text[:MAX_UNPARSED_CHARS]}..."


def error_of(err: ClientError) -> tuple[str, str]:
    """The (code, message) of an AWS error answer (``"Unknown"``/empty when absent). Pure."""
    error = err.response.get("Error", {})
    return str(error.get("Code", "Unknown")), str(error.get("Message", ""))


def retryable(err: ClientError) -> bool:
    """True for an answer worth retrying: a code in ``RETRYABLE_CODES`` or an HTTP 5xx status. Pure."""
    code, _ = error_of(err)
    status = int(err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    return code in RETRYABLE_CODES or status >= 500


def translate(operation: str, err: ClientError) -> AwsUnavailableError | AwsRequestError:
    """The project's exception for an AWS error answer (to be raised ``from err``): retryable for throttling
    and 5xx, not retryable otherwise."""
    code, message = error_of(err)
    if retryable(err):
        return AwsUnavailableError(operation, code, message)
    return AwsRequestError(operation, code, message)


def call(operation: str, fn: Callable[..., T], **kwargs: Any) -> T:
    """Call one AWS API operation (``fn(**kwargs)``), translating its errors.

    Args:
        operation: the API operation's name for errors and logs, e.g. ``DetachInstances``.
        fn: the bound client method.

    Raises:
        AwsUnavailableError: throttled, a 5xx, no connection, or an answer botocore cannot parse.
        AwsRequestError: any other error answer, or any other botocore error.
    """
    try:
        return fn(**kwargs)
    except ClientError as err:
        raise translate(operation, err) from err
    except CONNECTION_ERRORS as err:
        raise AwsUnavailableError(operation, type(err).__name__, str(err)) from err
    except ResponseParserError as err:
        raise AwsUnavailableError(operation, "ResponseParserError", unparsed(err)) from err
    except BotoCoreError as err:
        raise AwsRequestError(operation, type(err).__name__, str(err)) from err


def call_unless_gone(operation: str, fn: Callable[..., T], gone: Callable[[str, str], bool], **kwargs: Any) -> T | None:
    """Call one AWS API operation whose target may legitimately be gone already (an instance no longer in its
    group, a lifecycle action already completed).

    Args:
        gone: called with an error answer's code and message; True when the answer means "already gone".

    Returns:
        The answer, or None when ``gone`` recognised the error answer.

    Raises:
        AwsUnavailableError: throttled, a 5xx, or no connection.
        AwsRequestError: any other error answer, or any other botocore error.
    """
    try:
        return call(operation, fn, **kwargs)
    except (AwsUnavailableError, AwsRequestError) as err:
        cause = err.__cause__
        if isinstance(cause, ClientError) and gone(*error_of(cause)):
            return None
        raise
