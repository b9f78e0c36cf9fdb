"""One pod's eviction retries (``agent.drain.attempts``): the grace each request carries, backoff on a budget's
429, the switch to a DELETE past the budget near a deadline-bound drain's end, giving up on errors; and the answers
of a DELETE shaped as an eviction's."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agent.drain.attempts import EVICTION_ERROR_RETRIES, EvictionAttempts, delete_answer
from agent.drain.policy import GraceSource, PodAction
from agent.kube.eviction import EvictionResponse, EvictionStatus
from agent.kube.views import PodView
from core.exceptions import KubernetesApiError, KubernetesRejectedError
from core.model import DrainOptions

NOW = datetime(2026, 1, 5, tzinfo=UTC)
POD = PodView(namespace="ns", name="web", uid="u1", termination_grace_period_seconds=30)
BLOCKED = EvictionResponse(EvictionStatus.BLOCKED, 429, "x", pdb_name="web-pdb")
ERROR = EvictionResponse(EvictionStatus.ERROR, 500, "boom", retryable=True)


def tries(action: PodAction = PodAction.EVICT, options: DrainOptions | None = None) -> EvictionAttempts:
    return EvictionAttempts(POD, action, options or DrainOptions(), 1.0, 8.0, 10.0)


def test_an_eviction_carries_the_pods_own_grace_while_it_fits_and_a_capped_one_after() -> None:
    t = tries()
    first = t.request(remaining=100.0)
    assert not first.delete and first.grace is not None and first.grace.source is GraceSource.POD
    assert first.send is None and t.attempts == 1
    late = t.request(remaining=25.0)
    assert late.grace is not None and late.grace.source is GraceSource.DEADLINE and late.send == 15


def test_an_accepted_eviction_ends_the_worker_with_its_grace() -> None:
    t = tries()
    request = t.request(100.0)
    update, delay = t.answer(
        request, EvictionResponse(EvictionStatus.EVICTED, 201), NOW, lambda: 100.0, False, lambda: 0
    )
    assert delay is None and update.final and update.grace == request.grace and update.at == NOW


def test_a_budget_refusal_backs_off_exponentially_and_a_bound_drain_deletes_past_it_when_grace_stops_fitting() -> None:
    t = tries()
    delays = []
    for _ in range(3):
        update, delay = t.answer(t.request(1000.0), BLOCKED, NOW, lambda: 1000.0, False, lambda: 1.0)
        assert not update.final
        delays.append(delay)
    assert delays == [1.0, 2.0, 4.0] and not t.refused_by_pdb
    bound = tries()
    _, delay = bound.answer(bound.request(45.0), BLOCKED, NOW, lambda: 45.0, True, lambda: 1.0)
    assert bound.refused_by_pdb and delay == pytest.approx(1.0)  # 45 - 10 margin - 30 grace - 1 = 4 > backoff 1
    _, delay = bound.answer(bound.request(42.0), BLOCKED, NOW, lambda: 42.0, True, lambda: 1.0)
    assert delay == pytest.approx(1.0)  # due in 1 s: min(backoff 2, due 1)
    past = bound.request(40.0)
    assert past.delete and past.grace is not None and past.grace.source is GraceSource.PDB_DEADLINE
    assert past.send == 30  # its whole grace still fits


def test_retryable_errors_give_up_after_the_retry_limit_and_others_at_once() -> None:
    t = tries()
    for _ in range(EVICTION_ERROR_RETRIES - 1):
        _, delay = t.answer(t.request(1000.0), ERROR, NOW, lambda: 1000.0, False, lambda: 0.0)
        assert delay is not None
    update, delay = t.answer(t.request(1000.0), ERROR, NOW, lambda: 1000.0, False, lambda: 0.0)
    assert delay is None and update.final and update.error == "HTTP 500: boom"
    forbidden = EvictionResponse(EvictionStatus.ERROR, 403, "no", retryable=False)
    t2 = tries()
    update, delay = t2.answer(t2.request(1000.0), forbidden, NOW, lambda: 1000.0, False, lambda: 0.0)
    assert delay is None and update.error == "HTTP 403: no"


def test_a_finished_pod_is_deleted_with_the_commands_override_only() -> None:
    request = tries(PodAction.DELETE, DrainOptions(grace_period_seconds=5)).request(100.0)
    assert request.delete and request.grace is None and request.send == 5


class Deleter:
    def __init__(self, result: bool | Exception) -> None:
        self.result = result

    def delete_pod(self, namespace: str, name: str, uid: str | None = None, grace: int | None = None) -> bool:
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


@pytest.mark.parametrize(
    ("result", "status", "http", "retryable"),
    [
        (True, EvictionStatus.EVICTED, 200, False),
        (False, EvictionStatus.GONE, 404, False),
        (KubernetesApiError("down"), EvictionStatus.ERROR, 0, True),
        (KubernetesRejectedError(403, "no"), EvictionStatus.ERROR, 403, False),
    ],
)
def test_a_delete_answers_like_an_eviction(
    result: bool | Exception, status: EvictionStatus, http: int, retryable: bool
) -> None:
    answer = delete_answer(Deleter(result), POD, None)  # type: ignore[arg-type]  # only delete_pod is called
    assert (answer.status, answer.http_status, answer.retryable) == (status, http, retryable)
