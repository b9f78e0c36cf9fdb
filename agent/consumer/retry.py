"""Retrying a step of a command in the agent: a retryable Kubernetes, DynamoDB or SQS error (``RetryableError``:
5xx, throttling, connection) is tried again with exponential backoff and jitter (``core.clock.backoff_delay``) for
at most a time budget (``COMMAND_RETRY_SECONDS``, and never past the command's deadline), before the command is
handed back to the queue. A burst of errors shorter than the budget costs no SQS receive, so it cannot push the
message towards the dead-letter queue.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from core.clock import backoff_delay
from core.exceptions import ControlPlaneBusyError, RetryableError

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class Retry:
    """How a step is retried.

    Attributes:
        budget_seconds: longest time spent retrying one step (``COMMAND_RETRY_SECONDS``); 0 tries once.
        base_seconds, cap_seconds: the backoff's first delay and its cap.
        sleep, monotonic, rand: injectable for tests.
    """

    budget_seconds: float = 60.0
    base_seconds: float = 0.5
    cap_seconds: float = 8.0
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False)
    monotonic: Callable[[], float] = field(default=time.monotonic, compare=False)
    rand: Callable[[], float] = field(default=random.random, compare=False)

    def call(
        self,
        step: Callable[[], T],
        what: str,
        seconds_left: float | None = None,
        on_retry: Callable[[RetryableError], None] | None = None,
        cancelled: Callable[[], bool] = lambda: False,
    ) -> T:
        """``step()``, tried again after each ``RetryableError`` while the next try still starts within the budget
        (and within ``seconds_left``, the command's time to its deadline, when given). ``ControlPlaneBusyError`` is
        not a fault and is raised at once, so is any error once ``cancelled()`` (the job was handed back).

        Raises:
            RetryableError: the last one, once the budget is spent. Anything else ``step`` raises, at once.
        """
        limit = self.budget_seconds if seconds_left is None else min(self.budget_seconds, seconds_left)
        started = self.monotonic()
        attempt = 0
        while True:
            attempt += 1
            try:
                return step()
            except ControlPlaneBusyError:
                raise
            except RetryableError as err:
                delay = backoff_delay(attempt, self.base_seconds, self.cap_seconds, self.rand)
                if cancelled() or self.monotonic() - started + delay > limit:
                    raise
                log.warning(
                    "retryable error, retrying step=%s attempt=%d in=%.2fs error=%s: %s",
                    what,
                    attempt,
                    delay,
                    type(err).__name__,
                    err,
                )
                if on_retry is not None:
                    on_retry(err)
                self.sleep(delay)
