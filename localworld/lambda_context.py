"""What the Lambda runtime passes as ``context``, for running a handler in this process (scenarios, tests, benchmarks,
the CLI's ``--local`` mode). Not used in AWS."""

from __future__ import annotations

import time
import uuid

INTERRUPTION_FUNCTION = "node-manager-interruption"
REFRESHER_FUNCTION = "node-manager-refresher"


class LocalLambdaContext:
    """A Lambda context whose remaining time counts down from ``timeout_seconds`` (monotonic clock).

    Args:
        timeout_seconds: the function's timeout.
        function_name: the function it stands for (its ARN is in account 123456789012, us-east-1).
    """

    function_version = "$LATEST"
    memory_limit_in_mb = 256

    def __init__(self, timeout_seconds: float, function_name: str) -> None:
        self.function_name = function_name
        self.invoked_function_arn = f"arn:aws:lambda:us-east-1:123456789012:function:{function_name}"
        self.aws_request_id = str(uuid.uuid4())
        self._ends = time.monotonic() + timeout_seconds

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._ends - time.monotonic()) * 1000))
