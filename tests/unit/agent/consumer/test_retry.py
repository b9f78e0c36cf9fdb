"""``agent.consumer.retry.Retry``: retryable errors tried again with growing delays inside a budget and the
command's deadline; everything else at once. On a fake clock."""

from __future__ import annotations

import pytest

from agent.consumer.retry import Retry
from core.exceptions import (
    ControlPlaneBusyError,
    KubernetesApiError,
    KubernetesRejectedError,
    StoreUnavailableError,
)


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    def monotonic(self) -> float:
        return self.now


def retry(budget: float, fake: FakeTime) -> Retry:
    return Retry(budget, 0.5, 8.0, sleep=fake.sleep, monotonic=fake.monotonic, rand=lambda: 1.0)


def failing(times: int, error: Exception) -> tuple[list[int], object]:
    calls: list[int] = []

    def step() -> str:
        calls.append(1)
        if len(calls) <= times:
            raise error
        return "done"

    return calls, step


def test_a_burst_shorter_than_the_budget_is_absorbed_with_doubling_delays() -> None:
    fake = FakeTime()
    calls, step = failing(5, KubernetesApiError("HTTP 503"))
    retried: list[Exception] = []
    assert retry(60, fake).call(step, "run", on_retry=retried.append) == "done"  # type: ignore[arg-type]  # a step
    assert len(calls) == 6 and len(retried) == 5
    assert fake.slept == [0.5, 1.0, 2.0, 4.0, 8.0]  # capped at 8


def test_the_last_error_is_raised_once_the_budget_is_spent() -> None:
    fake = FakeTime()
    calls, step = failing(100, StoreUnavailableError("throttled"))
    with pytest.raises(StoreUnavailableError):
        retry(10, fake).call(step, "read")  # type: ignore[arg-type]  # a step
    assert fake.now == 7.5 and len(calls) == 5  # 0.5 + 1 + 2 + 4 = 7.5; one more (8) would pass 10


def test_never_past_the_deadline() -> None:
    fake = FakeTime()
    calls, step = failing(100, KubernetesApiError("HTTP 503"))
    with pytest.raises(KubernetesApiError):
        retry(60, fake).call(step, "run", seconds_left=2.0)  # type: ignore[arg-type]  # a step
    assert fake.now == 1.5 and len(calls) == 3  # 0.5 + 1; one more (2) would pass 2


@pytest.mark.parametrize("error", [ControlPlaneBusyError("held"), KubernetesRejectedError(403, "forbidden")])
def test_a_wait_or_a_final_refusal_is_raised_at_once(error: Exception) -> None:
    fake = FakeTime()
    calls, step = failing(1, error)
    with pytest.raises(type(error)):
        retry(60, fake).call(step, "run")  # type: ignore[arg-type]  # a step
    assert len(calls) == 1 and fake.slept == []


def test_a_handed_back_job_stops_retrying() -> None:
    fake = FakeTime()
    calls, step = failing(100, KubernetesApiError("HTTP 503"))
    with pytest.raises(KubernetesApiError):
        retry(60, fake).call(step, "run", cancelled=lambda: len(calls) >= 2)  # type: ignore[arg-type]  # a step
    assert len(calls) == 2


def test_a_zero_budget_tries_once() -> None:
    fake = FakeTime()
    calls, step = failing(1, KubernetesApiError("HTTP 503"))
    with pytest.raises(KubernetesApiError):
        retry(0, fake).call(step, "run")  # type: ignore[arg-type]  # a step
    assert len(calls) == 1
