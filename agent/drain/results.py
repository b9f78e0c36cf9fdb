"""What one cordon, drain or uncordon command did (JSON-able pydantic models).

The consumer stores ``NodeCommandResult.model_dump(mode="json")`` as the ``CMD#`` item's ``result`` and sends it in the
agent's EventBridge event; ``agent.events`` summarizes it as a Kubernetes Event on the Node.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from agent.drain.policy import GraceSource, PodAction
from core.model import CommandKind, CommandStatus


class PodOutcome(BaseModel):
    """What happened to one pod of the node.

    Attributes:
        action: the disposition's action (evict, delete, skip, wait, refuse).
        reason: the disposition's reason ("daemonset", "emptydir: local data lost", ...).
        attempts: eviction (or delete) requests sent.
        evicted_at: when the apiserver accepted the eviction (UTC).
        gone: the pod was seen deleted (or replaced by another pod of the same name) before the end.
        error: the last error, when the eviction failed or was still being refused.
        grace_seconds: the grace period the pod got (its ``deletionGracePeriodSeconds``) from the accepted
            eviction or deletion; None when none was accepted (or for a finished pod's plain DELETE).
        grace_source: why that grace: ``pod`` (its own terminationGracePeriodSeconds), ``option`` (the command's
            grace_period_seconds), ``deadline`` (capped to the time left before the deadline minus
            DRAIN_GRACE_MARGIN_SECONDS), ``pdb-deadline`` (deleted past its PodDisruptionBudget near the deadline,
            DRAIN_PDB_DEADLINE_POLICY=delete). Both fields were added later: older results lack them.
    """

    namespace: str
    name: str
    uid: str = ""
    action: PodAction
    reason: str = ""
    attempts: int = 0
    evicted_at: datetime | None = None
    gone: bool = False
    error: str | None = None
    grace_seconds: int | None = None
    grace_source: GraceSource | None = None


class RemainingPod(BaseModel):
    """A pod still on the node at the end, and why ("blocked by PodDisruptionBudget web", "still terminating")."""

    namespace: str
    name: str
    why: str


class Durations(BaseModel):
    """Seconds spent: finding the node, cordoning, evicting (until every eviction was answered for good), waiting
    (after the last eviction until the last pod was gone), and in all."""

    resolve: float = 0.0
    cordon: float = 0.0
    evict: float = 0.0
    wait: float = 0.0
    total: float = 0.0


class NodeCommandResult(BaseModel):
    """The result of one command (JSON-able: ``model_dump(mode="json")``).

    Attributes:
        status: succeeded | timed_out | failed | skipped (``core.model.CommandStatus``).
        cordoned_by_us: our cordon annotation is on the node (we cordoned it, now or earlier).
        cordoned_by_other: the node was cordoned by someone else (never uncordoned by us).
        uncordoned: this command removed our cordon.
        pods: every pod found on the node, with what was done.
        remaining: pods still on the node at the deadline (or at a failure), with why.
        errors: errors met (per pod, uncordon after failure ...).
        event_posted: a Kubernetes Event for this result was posted on the Node.
    """

    command_id: str
    kind: CommandKind
    instance_id: str
    node_name: str
    status: CommandStatus
    message: str = ""
    cordoned_by_us: bool = False
    cordoned_by_other: bool = False
    uncordoned: bool = False
    pods: list[PodOutcome] = Field(default_factory=list)
    remaining: list[RemainingPod] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    durations: Durations = Field(default_factory=Durations)
    started_at: datetime
    finished_at: datetime
    event_posted: bool = False
