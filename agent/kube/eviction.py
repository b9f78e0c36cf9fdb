"""How the eviction subresource answers, classified (pure; this module does not import ``kubernetes``).

``KubeAdapter.evict_pod`` never raises for an HTTP or connection error: it returns an ``EvictionResponse`` built
here, and the drain decides from its ``status`` whether to wait, retry with backoff or give up.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from agent.kube.views import parse_status

DEFAULT_EVICTION_API_VERSION = "policy/v1"


class EvictionStatus(str, Enum):
    """How the eviction subresource answered (https://kubernetes.io/docs/concepts/scheduling-eviction/api-eviction/)."""

    EVICTED = "evicted"  # 200/201: the pod is being deleted (gracefully)
    GONE = "gone"  # 404 (no such pod) or 409 on the uid precondition (the pod was replaced)
    BLOCKED = "blocked"  # 429: a PodDisruptionBudget (or API priority and fairness) says not now
    MULTIPLE_PDBS = "multiple_pdbs"  # 500 "more than one PodDisruptionBudget": the apiserver cannot decide
    ERROR = "error"  # anything else; see ``retryable``


@dataclass(frozen=True)
class EvictionResponse:
    """The outcome of one eviction request.

    Attributes:
        status: see ``EvictionStatus``.
        http_status: the HTTP status (0 for a connection failure).
        message: the apiserver's ``Status.message`` (or the connection error).
        pdb_name: for ``BLOCKED``, the disruption budget named in ``details.causes`` when the apiserver gives it.
        retryable: for ``ERROR``, whether trying again may help (5xx, connection); false for other 4xx.
    """

    status: EvictionStatus
    http_status: int = 0
    message: str = ""
    pdb_name: str | None = None
    retryable: bool = False

    @property
    def pdb_blocked(self) -> bool:
        """A PodDisruptionBudget refused it: 500 "more than one PodDisruptionBudget", or a 429 naming a budget
        (``details.causes`` reason ``DisruptionBudget``, or a message about the pod's disruption budget). A 429
        from API Priority and Fairness (the apiserver shedding load) is not."""
        if self.status == EvictionStatus.MULTIPLE_PDBS:
            return True
        return self.status == EvictionStatus.BLOCKED and (
            self.pdb_name is not None or "disruption budget" in self.message.lower()
        )


def blocking_pdb_name(status_body: Mapping[str, Any]) -> str | None:
    """The PodDisruptionBudget named in a 429 eviction answer, None if it names none.

    The apiserver's cause message reads ``The disruption budget <name> needs <n> healthy pods and has <m>
    currently`` (reason ``DisruptionBudget``; pkg/registry/core/pod/storage/eviction.go).
    """
    details = status_body.get("details") or {}
    for cause in details.get("causes") or []:
        if cause.get("reason") != "DisruptionBudget":
            continue
        words = str(cause.get("message", "")).split()
        if len(words) >= 4 and words[:3] == ["The", "disruption", "budget"]:
            return words[3]
    return None


def classify_eviction_error(http_status: int, body: str | None) -> EvictionResponse:
    """Map an eviction's error answer to an ``EvictionResponse`` (pure).

    404 -> GONE; 409 (uid precondition failed: the pod was deleted and recreated) -> GONE; 429 -> BLOCKED (with
    the PDB's name when given); 500 mentioning several PodDisruptionBudgets -> MULTIPLE_PDBS; other 5xx and 0
    (connection) -> retryable ERROR; other 4xx -> non-retryable ERROR.
    """
    status = parse_status(body)
    message = str(status.get("message") or body or "")
    if http_status == 404 or http_status == 409:
        return EvictionResponse(EvictionStatus.GONE, http_status, message)
    if http_status == 429:
        return EvictionResponse(EvictionStatus.BLOCKED, http_status, message, pdb_name=blocking_pdb_name(status))
    if (
        http_status == 500
        and "PodDisruptionBudget" in message
        and ("more than one" in message or "multiple" in message.lower())
    ):
        return EvictionResponse(EvictionStatus.MULTIPLE_PDBS, http_status, message)
    retryable = http_status == 0 or http_status >= 500
    return EvictionResponse(EvictionStatus.ERROR, http_status, message, retryable=retryable)


def eviction_api_version(resources: Sequence[Mapping[str, Any]]) -> str:
    """The group/version the apiserver serves for ``pods/eviction``, from the core/v1 discovery document.

    v1.20 answers ``policy/v1beta1`` (and rejects a ``policy/v1`` body with 400 "no kind Eviction is registered
    for version policy/v1"); v1.22+ answer ``policy/v1``. kubectl drain chooses the same way
    (``CheckEvictionSupport`` in k8s.io/kubectl/pkg/drain). Defaults to ``policy/v1`` when not listed.
    """
    for res in resources:
        if res.get("name") == "pods/eviction" and res.get("group") and res.get("version"):
            return f"{res['group']}/{res['version']}"
    return DEFAULT_EVICTION_API_VERSION
