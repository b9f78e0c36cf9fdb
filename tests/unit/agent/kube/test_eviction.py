"""Eviction answers classified (``agent.kube.eviction``): gone, blocked by a budget, retryable or not."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from agent.kube.eviction import (
    EvictionStatus,
    blocking_pdb_name,
    classify_eviction_error,
    eviction_api_version,
)

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


PDB_429 = json.dumps(
    {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": "Cannot evict pod as it would violate the pod's disruption budget.",
        "reason": "TooManyRequests",
        "details": {
            "causes": [
                {
                    "reason": "DisruptionBudget",
                    "message": "The disruption budget web-pdb needs 2 healthy pods and has 2 currently",
                }
            ]
        },
        "code": 429,
    }
)
MULTI_500 = json.dumps(
    {
        "kind": "Status",
        "status": "Failure",
        "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
        "code": 500,
    }
)


@pytest.mark.parametrize(
    ("status", "body", "expected", "retryable"),
    [
        (429, PDB_429, EvictionStatus.BLOCKED, False),
        (429, '{"message": "too many requests, please try again later"}', EvictionStatus.BLOCKED, False),
        (500, MULTI_500, EvictionStatus.MULTIPLE_PDBS, False),
        (404, '{"message": "pods \\"x\\" not found"}', EvictionStatus.GONE, False),
        (409, '{"message": "the UID in the precondition does not match"}', EvictionStatus.GONE, False),
        (503, '{"message": "unavailable"}', EvictionStatus.ERROR, True),
        (500, '{"message": "etcdserver: request timed out"}', EvictionStatus.ERROR, True),
        (0, None, EvictionStatus.ERROR, True),
        (403, '{"message": "forbidden"}', EvictionStatus.ERROR, False),
        (400, "not json", EvictionStatus.ERROR, False),
    ],
)
def test_classify_eviction_error(status: int, body: str | None, expected: EvictionStatus, retryable: bool) -> None:
    response = classify_eviction_error(status, body)
    assert response.status == expected
    assert response.retryable == retryable
    assert response.http_status == status


def test_pdb_name_comes_from_the_cause() -> None:
    assert classify_eviction_error(429, PDB_429).pdb_name == "web-pdb"
    other_cause = {"details": {"causes": [{"reason": "Other", "message": "The disruption budget x"}]}}
    assert blocking_pdb_name(other_cause) is None
    assert blocking_pdb_name({}) is None


def test_eviction_api_version_from_discovery() -> None:
    v120 = [{"name": "pods", "kind": "Pod"}, {"name": "pods/eviction", "group": "policy", "version": "v1beta1"}]
    v125 = [{"name": "pods/eviction", "group": "policy", "version": "v1"}]
    assert eviction_api_version(v120) == "policy/v1beta1"
    assert eviction_api_version(v125) == "policy/v1"
    assert eviction_api_version([]) == "policy/v1"


@pytest.mark.parametrize(
    ("status", "body", "pdb_blocked"),
    [
        (429, PDB_429, True),
        # v1.20's message without causes still names the disruption budget
        (429, '{"message": "Cannot evict pod as it would violate the pod\'s disruption budget."}', True),
        (500, MULTI_500, True),
        # API Priority and Fairness shedding load: not a budget
        (429, '{"message": "too many requests, please try again later"}', False),
        (503, '{"message": "unavailable"}', False),
        (404, '{"message": "pods \\"x\\" not found"}', False),
    ],
)
def test_pdb_blocked_tells_a_budget_from_load_shedding(status: int, body: str, pdb_blocked: bool) -> None:
    assert classify_eviction_error(status, body).pdb_blocked is pdb_blocked
