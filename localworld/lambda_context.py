"""What the Lambda runtime passes as ``context``, for running a handler in this process (scenarios, tests, benchmarks,
the CLI's ``--local`` mode). Not used in AWS."""

from __future__ import annotations

import time
import uuid

from aws_lambda_powertools.utilities.typing import LambdaContext

INTERRUPTION_FUNCTION = "node-manager-interruption"
REFRESHER_FUNCTION = "node-manager-refresher"


class LocalLambdaContext(LambdaContext):
    """A Lambda context whose remaining time counts down from ``timeout_seconds`` (monotonic clock).

    A Powertools ``LambdaContext`` (the type the handlers declare), filled as the Lambda runtime fills it: the
    function's name, version ``$LATEST``, ARN (account 123456789012, us-east-1), 256 MB, a new request id, the log
    group and stream a function of that name would write to; no client context (as EventBridge sends none).

    Args:
        timeout_seconds: the function's timeout.
        function_name: the function it stands for.
    """

    def __init__(self, timeout_seconds: float, function_name: str) -> None:
        self._function_name = function_name
        self._function_version = "$LATEST"
        self._invoked_function_arn = f"arn:aws:lambda:us-east-1:123456789012:function:{function_name}"
        self._memory_limit_in_mb = 256
        self._aws_request_id = str(uuid.uuid4())
        self._log_group_name = f"/aws/lambda/{function_name}"
        self._log_stream_name = "local"
        self._ends = time.monotonic() + timeout_seconds

    @property
    def client_context(self) -> None:  # type: ignore[override]  # the runtime gives None when no client context came
        return None

    def get_remaining_time_in_millis(self) -> int:  # type: ignore[override]  # Powertools declares a staticmethod stub
        return max(0, int((self._ends - time.monotonic()) * 1000))
