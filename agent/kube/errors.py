"""Kubernetes API errors mapped to the project's exceptions, in one function (``kube_error``).

Status codes as the Kubernetes API documents them
(https://kubernetes.io/docs/reference/using-api/api-concepts/#http-status-codes):

- 404 -> ``KubernetesNotFoundError``; 409 -> ``KubernetesConflictError`` (both ``KubernetesRejectedError``);
- 429 -> ``KubernetesTooManyRequestsError`` carrying the ``Retry-After`` seconds (a retryable
  ``KubernetesApiError``);
- connection failures, timeouts (status 0) and 5xx -> ``KubernetesApiError`` (retryable);
- other 4xx (403 forbidden: the agent's ClusterRole lacks a verb; 400; 422) -> ``KubernetesRejectedError``.

Evictions are the exception: their answers are classified, not raised (``agent.kube.eviction``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException

from agent.kube.views import parse_status
from core.exceptions import (
    KubernetesApiError,
    KubernetesConflictError,
    KubernetesNotFoundError,
    KubernetesRejectedError,
    KubernetesTooManyRequestsError,
    NodeManagerError,
)

# Failures below HTTP: the connection broke, timed out or could not be made.
TRANSPORT_ERRORS: tuple[type[Exception], ...] = (urllib3.exceptions.HTTPError, OSError)
# What a call into the generated client may raise (catch these, then ``raise kube_error(err, what) from err``).
API_ERRORS: tuple[type[Exception], ...] = (ApiException, *TRANSPORT_ERRORS)


def retry_after_seconds(headers: Mapping[str, Any] | None, status: Mapping[str, Any]) -> float | None:
    """Seconds to wait from a 429 answer: the ``Retry-After`` header (delay-seconds form), else the Status'
    ``details.retryAfterSeconds``; None when neither names a number. Pure."""
    for value in ((headers or {}).get("Retry-After"), (status.get("details") or {}).get("retryAfterSeconds")):
        if value is None:
            continue
        try:
            return max(0.0, float(value))
        except (TypeError, ValueError):
            continue
    return None


def kube_error(err: Exception, what: str) -> NodeManagerError:
    """The project's exception for a failed Kubernetes request; raise it ``from err``.

    Args:
        err: an ``ApiException`` (HTTP answer) or a transport error (``TRANSPORT_ERRORS``).
        what: the request in words, e.g. ``get node ip-10-0-0-1``; starts the message.

    Returns:
        see the module docstring for the mapping.
    """
    if not isinstance(err, ApiException):
        return KubernetesApiError(f"{what}: {err}")
    code = int(err.status or 0)
    status = parse_status(err.body)
    text = f"{what}: HTTP {code} {status.get('message') or err.reason or ''}"
    if code == 404:
        return KubernetesNotFoundError(text)
    if code == 409:
        return KubernetesConflictError(text)
    if code == 429:
        return KubernetesTooManyRequestsError(text, retry_after_seconds(err.headers, status))
    if code == 0 or code >= 500:
        return KubernetesApiError(text)
    return KubernetesRejectedError(code, text)
