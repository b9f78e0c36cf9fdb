"""Running the refresher's handler in this process, as Lambda would: for the CLI's ``--local`` mode, the scenario,
the tests and the benchmark. Not used in AWS.

``LocalInvoker`` plays the Lambda service: synchronous invocations (``invoke``, as ``aws lambda invoke`` makes) and
asynchronous ones (``invoke_async``, as EventBridge makes) run on a small pool of "execution environments", each
with its own ``Deps`` (its own boto3 clients), so concurrent invocations meet each other as in AWS. ``subscribe``
connects it to an event pump (``localworld.eventbus.EventBus``) for every event the CDK rules route to the function.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

from lambdas.events import agent_result, node_ready, scheduled
from lambdas.refresher.handler import Deps, handle
from localworld.lambda_context import REFRESHER_FUNCTION, LocalLambdaContext


class LocalInvoker:
    """Invoke the handler in this process.

    Args:
        make_deps: builds one execution environment's ``Deps`` (called once per worker thread).
        concurrency: execution environments (worker threads) for asynchronous invocations.
        timeout_seconds: the function's timeout (``context``'s remaining time).

    Attributes:
        responses: (event, response) of every finished invocation; errors: (event, exception) of failed ones.
        spans: (start, end, response status, thread id) in ``time.monotonic`` seconds of every finished
            invocation, for measuring how often invocations overlap (the benchmark).
    """

    def __init__(self, make_deps: Callable[[], Deps], concurrency: int = 2, timeout_seconds: float = 120.0) -> None:
        self.make_deps = make_deps
        self.timeout_seconds = timeout_seconds
        self.responses: list[tuple[dict[str, Any], dict[str, Any]]] = []
        self.errors: list[tuple[dict[str, Any], BaseException]] = []
        self.spans: list[tuple[float, float, str, int]] = []
        self._local = threading.local()
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="refresher")
        self._pending: set[Future[Any]] = set()
        self._lock = threading.Lock()

    def deps(self) -> Deps:
        """This thread's execution environment (built on first use)."""
        if getattr(self._local, "deps", None) is None:
            self._local.deps = self.make_deps()
        deps: Deps = self._local.deps
        return deps

    def invoke(self, event: dict[str, Any]) -> dict[str, Any]:
        """A synchronous invocation: returns the response, raises what the handler raised."""
        start = time.monotonic()
        try:
            response = handle(event, self.deps(), LocalLambdaContext(self.timeout_seconds, REFRESHER_FUNCTION))
        except BaseException as err:
            with self._lock:
                self.errors.append((event, err))
                self.spans.append((start, time.monotonic(), "error", threading.get_ident()))
            raise
        with self._lock:
            self.responses.append((event, response))
            self.spans.append((start, time.monotonic(), str(response.get("status")), threading.get_ident()))
        return response

    def invoke_async(self, event: dict[str, Any]) -> Future[Any]:
        """An asynchronous invocation (EventBridge's): queued on the pool, errors kept in ``errors``."""

        def run() -> dict[str, Any] | None:
            try:
                return self.invoke(event)
            except Exception:  # noqa: BLE001 - kept in self.errors, as Lambda would log and retry
                return None

        future = self._pool.submit(run)
        with self._lock:
            self._pending.add(future)
        future.add_done_callback(lambda f: self._forget(f))
        return future

    def _forget(self, future: Future[Any]) -> None:
        with self._lock:
            self._pending.discard(future)

    def subscribe(self, bus: Any) -> None:
        """Route what the stack's rules route to the function: the agent's drain results (and cordon results, which
        the function acknowledges unless they are a rebalance cordon's), the agent's "Node Ready", scheduled events
        (the tick); no Launch Successful (``infra.refresher``: no rule routes it)."""
        for detail_type in (*agent_result.DRAIN_DETAIL_TYPES, *agent_result.CORDON_DETAIL_TYPES):
            bus.subscribe(agent_result.SOURCE, detail_type, self.invoke_async)
        bus.subscribe(node_ready.SOURCE, node_ready.DETAIL_TYPE, self.invoke_async)
        bus.subscribe(scheduled.SOURCE, scheduled.DETAIL_TYPE, self.invoke_async)

    def settle(self, timeout: float) -> bool:
        """Wait until no asynchronous invocation is queued or running (at most ``timeout`` s); True if none is."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                pending = set(self._pending)
            if not pending:
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            wait(pending, timeout=left)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
