"""The client-side Kubernetes request rate limit (``agent.kube.ratelimit.TokenBucket``)."""

from __future__ import annotations

import threading
import time

import pytest

from agent.kube.ratelimit import TokenBucket


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_full_bucket_gives_its_burst_then_one_token_per_1_over_qps() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=10, burst=3, clock=clock)
    assert [bucket.try_take() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.try_take() == pytest.approx(0.1)
    clock.now += 0.05
    assert bucket.try_take() == pytest.approx(0.05)
    clock.now += 0.05
    assert bucket.try_take() == 0.0
    clock.now += 60  # a quiet minute refills the bucket up to its burst, no more
    assert [bucket.try_take() for _ in range(4)][-1] > 0


def test_waiting_requests_are_spread_at_qps() -> None:
    bucket = TokenBucket(qps=50, burst=5)
    started = time.monotonic()
    for _ in range(30):
        bucket.acquire()
    elapsed = time.monotonic() - started
    assert 0.45 <= elapsed < 1.5  # 5 from the burst, 25 at 50 a second: 0.5 s
    assert bucket.waited_seconds > 0


def test_an_urgent_request_goes_before_normal_ones_that_wait() -> None:
    bucket = TokenBucket(qps=20, burst=1)
    bucket.acquire()  # empty now
    order: list[str] = []
    lock = threading.Lock()

    def take(name: str, urgent: bool) -> None:
        bucket.acquire(urgent=urgent)
        with lock:
            order.append(name)

    normal = [threading.Thread(target=take, args=(f"evict-{i}", False)) for i in range(5)]
    for t in normal:
        t.start()
    time.sleep(0.02)  # the evictions are waiting
    cordon = threading.Thread(target=take, args=("cordon", True))
    cordon.start()
    for t in [*normal, cordon]:
        t.join(5)
    assert sorted(order) == sorted(["cordon", *(f"evict-{i}" for i in range(5))])
    assert order.index("cordon") <= 1  # at most the eviction already holding the next token goes first


def test_a_bucket_needs_a_rate_and_a_size() -> None:
    with pytest.raises(ValueError):
        TokenBucket(qps=0, burst=1)
    with pytest.raises(ValueError):
        TokenBucket(qps=1, burst=0)
