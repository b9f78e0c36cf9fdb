"""``agent.kube.errors.kube_error``: one mapping from Kubernetes API answers to the project's exceptions."""

from __future__ import annotations

import json

import pytest
import urllib3
from kubernetes.client.exceptions import ApiException

from agent.kube.errors import kube_error, retry_after_seconds
from core.exceptions import (
    KubernetesApiError,
    KubernetesConflictError,
    KubernetesNotFoundError,
    KubernetesRejectedError,
    KubernetesTooManyRequestsError,
)


def api_error(status: int, message: str = "", headers: dict[str, str] | None = None, **details: object) -> ApiException:
    err = ApiException(status=status, reason="Reason")
    err.body = json.dumps({"kind": "Status", "message": message, "details": details})
    err.headers = headers
    return err


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (404, KubernetesNotFoundError),
        (409, KubernetesConflictError),
        (429, KubernetesTooManyRequestsError),
        (500, KubernetesApiError),
        (503, KubernetesApiError),
        (0, KubernetesApiError),
        (403, KubernetesRejectedError),
        (422, KubernetesRejectedError),
    ],
)
def test_each_status_maps_to_the_exception_named_by_its_cause(status: int, kind: type[Exception]) -> None:
    err = kube_error(api_error(status, "nope"), "get node a")
    assert type(err) is kind
    assert str(err) == f"get node a: HTTP {status} nope"


def test_not_found_and_conflict_stay_rejections_and_too_many_requests_stays_retryable() -> None:
    assert isinstance(kube_error(api_error(404), "x"), KubernetesRejectedError)
    conflict = kube_error(api_error(409), "x")
    assert isinstance(conflict, KubernetesRejectedError)
    assert conflict.status == 409
    assert isinstance(kube_error(api_error(429), "x"), KubernetesApiError)


def test_too_many_requests_carries_retry_after_from_the_header_else_the_status() -> None:
    err = kube_error(api_error(429, headers={"Retry-After": "7"}, retryAfterSeconds=3), "list pods")
    assert isinstance(err, KubernetesTooManyRequestsError)
    assert err.retry_after == 7.0
    err = kube_error(api_error(429, retryAfterSeconds=3), "list pods")
    assert isinstance(err, KubernetesTooManyRequestsError)
    assert err.retry_after == 3.0
    assert retry_after_seconds({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, {}) is None


def test_a_transport_failure_is_retryable() -> None:
    err = kube_error(urllib3.exceptions.ProtocolError("reset"), "watch nodes")
    assert type(err) is KubernetesApiError
    assert str(err) == "watch nodes: reset"
