"""The drain's other pure parts: cordon/uncordon decisions, eviction answers, backoff, deadlines, progress
bookkeeping, node views, the result's JSON and the Event body."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta

import pytest

from agent.drain.cordon import decide_cordon, decide_uncordon
from agent.drain.policy import PodAction, plan_drain
from agent.drain.progress import DrainProgress, EvictionUpdate
from agent.drain.results import NodeCommandResult, PodOutcome
from agent.events import event_reason, node_event
from agent.kube.eviction import (
    EvictionResponse,
    EvictionStatus,
    blocking_pdb_name,
    classify_eviction_error,
    eviction_api_version,
)
from agent.kube.views import CORDON_ANNOTATION, NodeView, PodEvent, PodView
from core.clock import Deadline, backoff_delay
from core.model import CommandKind, CommandStatus, DrainOptions

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


class FakeClock:
    """A clock that moves only when told (or when slept on)."""

    def __init__(self) -> None:
        self.t = 1000.0

    def now(self) -> datetime:
        return T0 + timedelta(seconds=self.t - 1000.0)

    def monotonic(self) -> float:
        return self.t

    def sleep(self, seconds: float, stop: threading.Event) -> bool:
        self.t += seconds
        return stop.is_set()


def node(unschedulable: bool = False, annotations: dict[str, str] | None = None) -> NodeView:
    return NodeView.from_api(
        {
            "metadata": {"name": "n1", "uid": "nu", "resourceVersion": "42", "annotations": annotations or {}},
            "spec": {"providerID": "aws:///us-east-1a/i-0123456789abcdef0", "unschedulable": unschedulable},
        }
    )


# ------------------------------------------------------------------------------------------- cordon


def test_cordon_of_a_schedulable_node_is_ours_and_conditional() -> None:
    decision = decide_cordon(node(), "cmd-1")
    assert decision.ours and not decision.by_other
    assert decision.patch == {
        "metadata": {"resourceVersion": "42", "annotations": {CORDON_ANNOTATION: "cmd-1"}},
        "spec": {"unschedulable": True},
    }


def test_node_cordoned_by_someone_else_is_not_ours() -> None:
    decision = decide_cordon(node(unschedulable=True), "cmd-1")
    assert decision.patch is None and not decision.ours and decision.by_other


@pytest.mark.parametrize("holder", ["cmd-1", "earlier-rebalance-cmd"])
def test_node_already_cordoned_by_us_stays_ours(holder: str) -> None:
    decision = decide_cordon(node(unschedulable=True, annotations={CORDON_ANNOTATION: holder}), "cmd-1")
    assert decision.patch is None and decision.ours and not decision.by_other


def test_stale_annotation_on_an_uncordoned_node_is_rewritten() -> None:
    decision = decide_cordon(node(annotations={CORDON_ANNOTATION: "old"}), "cmd-2")
    assert decision.ours and decision.patch is not None
    assert decision.patch["metadata"]["annotations"] == {CORDON_ANNOTATION: "cmd-2"}


def test_uncordon_removes_our_cordon_and_annotation() -> None:
    decision = decide_uncordon(node(unschedulable=True, annotations={CORDON_ANNOTATION: "cmd-1"}))
    assert not decision.by_other
    assert decision.patch == {
        "metadata": {"resourceVersion": "42", "annotations": {CORDON_ANNOTATION: None}},
        "spec": {"unschedulable": None},
    }


def test_uncordon_leaves_someone_elses_cordon() -> None:
    decision = decide_uncordon(node(unschedulable=True))
    assert decision.patch is None and decision.by_other
    assert "someone else" in decision.message


def test_uncordon_of_a_schedulable_node_does_nothing() -> None:
    decision = decide_uncordon(node())
    assert decision.patch is None and not decision.by_other


def test_node_view_reads_provider_id_labels_and_readiness() -> None:
    view = NodeView.from_api(
        {
            "metadata": {"name": "i-0123456789abcdef0", "labels": {"kops.k8s.io/instancegroup": "nodes-a"}},
            "spec": {"providerID": "aws:///us-east-1a/i-0123456789abcdef0"},
            "status": {
                "conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "True"}]
            },
        }
    )
    assert view.instance_id == "i-0123456789abcdef0"
    assert view.ready and not view.unschedulable and view.cordoned_by is None
    assert view.labels["kops.k8s.io/instancegroup"] == "nodes-a"
    assert NodeView.from_api({"metadata": {"name": "x"}, "spec": {"providerID": "gce://p/z/x"}}).instance_id is None


# ----------------------------------------------------------------------------------------- evictions


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


# ------------------------------------------------------------------------------------ backoff, deadline


def test_backoff_doubles_up_to_the_cap_with_jitter_within_half() -> None:
    assert backoff_delay(1, 0.5, 5.0, rand=lambda: 1.0) == pytest.approx(0.5)
    assert backoff_delay(2, 0.5, 5.0, rand=lambda: 1.0) == pytest.approx(1.0)
    assert backoff_delay(3, 0.5, 5.0, rand=lambda: 1.0) == pytest.approx(2.0)
    assert backoff_delay(10, 0.5, 5.0, rand=lambda: 1.0) == pytest.approx(5.0)
    assert backoff_delay(10, 0.5, 5.0, rand=lambda: 0.0) == pytest.approx(2.5)
    assert backoff_delay(1, 0.5, 5.0, rand=lambda: 0.0) == pytest.approx(0.25)


def test_deadline_counts_down_on_the_injected_clock() -> None:
    clock = FakeClock()
    deadline = Deadline.at(clock.now() + timedelta(seconds=10), clock)
    assert deadline.remaining() == pytest.approx(10)
    clock.sleep(4, threading.Event())
    assert deadline.remaining() == pytest.approx(6) and not deadline.expired
    clock.sleep(7, threading.Event())
    assert deadline.remaining() == 0 and deadline.expired
    assert Deadline(clock, -1).expired


# ------------------------------------------------------------------------------------------ progress


def pod(name: str, uid: str | None = None, **extra: object) -> PodView:
    return PodView(namespace="ns", name=name, uid=uid or f"uid-{name}", **extra)  # type: ignore[arg-type]


def make_progress() -> DrainProgress:
    from agent.kube.views import OwnerRef

    rs = (OwnerRef("ReplicaSet", "rs", True),)
    pods = [
        pod("web", owners=rs),
        pod("db", owners=rs),
        pod("done", owners=rs, phase="Succeeded"),
        pod("leaving", owners=rs, deletion_timestamp=T0),
        pod("ds", owners=(OwnerRef("DaemonSet", "ds", True),)),
    ]
    return DrainProgress(plan_drain(pods, DrainOptions()))


def test_progress_settles_when_every_tracked_pod_is_gone() -> None:
    progress = make_progress()
    assert sorted(progress.states) == ["ns/db", "ns/done", "ns/leaving", "ns/web"]
    assert not progress.settled
    progress.apply_update(EvictionUpdate("ns/web", 1, EvictionResponse(EvictionStatus.EVICTED, 201), final=True, at=T0))
    assert not progress.states["ns/web"].gone  # accepted, not gone yet
    progress.apply_event(PodEvent("DELETED", pod("web")))
    progress.apply_event(PodEvent("MODIFIED", pod("db", uid="another-uid")))  # replaced under the same name
    progress.apply_update(EvictionUpdate("ns/done", 1, EvictionResponse(EvictionStatus.GONE, 404), final=True))
    assert not progress.settled
    progress.apply_snapshot([pod("ds")])  # a re-list no longer has "leaving"
    assert progress.settled and progress.remaining() == []
    outcomes = {o.name: o for o in progress.outcomes()}
    assert outcomes["web"].evicted_at == T0 and outcomes["web"].gone and outcomes["web"].attempts == 1
    assert outcomes["ds"].action == PodAction.SKIP and outcomes["ds"].reason == "daemonset"
    assert outcomes["leaving"].action == PodAction.WAIT


def test_event_for_same_pod_still_running_does_not_count_as_gone() -> None:
    progress = make_progress()
    progress.apply_event(PodEvent("MODIFIED", pod("web")))
    progress.apply_event(PodEvent("ADDED", pod("unrelated")))
    assert not progress.states["ns/web"].gone


def test_remaining_says_why() -> None:
    progress = make_progress()
    blocked = EvictionResponse(EvictionStatus.BLOCKED, 429, "violates", pdb_name="web-pdb")
    progress.apply_update(EvictionUpdate("ns/web", 3, blocked, final=False))
    multi = EvictionResponse(EvictionStatus.MULTIPLE_PDBS, 500, "more than one PodDisruptionBudget")
    progress.apply_update(EvictionUpdate("ns/db", 2, multi, final=False))
    accepted = EvictionResponse(EvictionStatus.EVICTED, 200)
    progress.apply_update(EvictionUpdate("ns/done", 1, accepted, final=True, at=T0))
    why = {r.name: r.why for r in progress.remaining()}
    assert why == {
        "web": "blocked by PodDisruptionBudget web-pdb",
        "db": "selected by more than one PodDisruptionBudget: more than one PodDisruptionBudget",
        "done": "still terminating",
        "leaving": "still terminating",
    }
    outcomes = {o.name: o for o in progress.outcomes()}
    assert outcomes["web"].attempts == 3 and outcomes["web"].error == "blocked by PodDisruptionBudget web-pdb"


def test_a_worker_that_gave_up_settles_as_a_failure() -> None:
    progress = make_progress()
    forbidden = EvictionResponse(EvictionStatus.ERROR, 403, "forbidden")
    progress.apply_update(EvictionUpdate("ns/web", 1, forbidden, final=True, error="HTTP 403: forbidden"))
    for name in ("db", "done", "leaving"):
        progress.apply_event(PodEvent("DELETED", pod(name)))
    assert progress.settled and progress.evictions_done
    assert [s.pod.name for s in progress.failures()] == ["web"]
    assert progress.remaining()[0].why == "eviction failed: HTTP 403: forbidden"


# --------------------------------------------------------------------------------------- result, event


def test_result_is_json_able() -> None:
    result = NodeCommandResult(
        command_id="c",
        kind=CommandKind.DRAIN,
        instance_id="i-0123456789abcdef0",
        node_name="n1",
        status=CommandStatus.TIMED_OUT,
        pods=[PodOutcome(namespace="ns", name="web", action=PodAction.EVICT, evicted_at=T0)],
        started_at=T0,
        finished_at=T0,
    )
    dumped = json.loads(json.dumps(result.model_dump(mode="json")))
    assert dumped["status"] == "timed_out" and dumped["pods"][0]["action"] == "evict"
    assert NodeCommandResult.model_validate(dumped) == result


@pytest.mark.parametrize(
    ("kind", "status", "by_other", "changed", "expected"),
    [
        (CommandKind.DRAIN, CommandStatus.SUCCEEDED, False, True, ("NodeDrainSucceeded", "Normal")),
        (CommandKind.DRAIN, CommandStatus.TIMED_OUT, False, True, ("NodeDrainTimedOut", "Warning")),
        (CommandKind.DRAIN, CommandStatus.FAILED, False, True, ("NodeDrainFailed", "Warning")),
        (CommandKind.CORDON, CommandStatus.SUCCEEDED, False, True, ("NodeCordoned", "Normal")),
        (CommandKind.CORDON, CommandStatus.SUCCEEDED, True, True, ("NodeCordonedByOther", "Normal")),
        (CommandKind.UNCORDON, CommandStatus.SUCCEEDED, False, True, ("NodeUncordoned", "Normal")),
        (CommandKind.UNCORDON, CommandStatus.SUCCEEDED, True, False, ("NodeUncordonSkipped", "Normal")),
        (CommandKind.UNCORDON, CommandStatus.FAILED, False, False, ("NodeUncordonFailed", "Warning")),
    ],
)
def test_event_reason(
    kind: CommandKind, status: CommandStatus, by_other: bool, changed: bool, expected: tuple[str, str]
) -> None:
    assert event_reason(kind, status, by_other=by_other, changed=changed) == expected


def test_node_event_body() -> None:
    body = node_event("n1", "nu", "NodeDrainSucceeded", "x" * 2000, "Normal", T0, host="agent-abc")
    assert body["metadata"]["namespace"] == "default"
    assert body["metadata"]["name"].startswith("n1.")
    assert body["involvedObject"] == {"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "nu"}
    assert body["source"] == {"component": "aws-node-manager", "host": "agent-abc"}
    assert len(body["message"]) == 1024 and body["message"].endswith("...")
    assert body["firstTimestamp"] == "2026-03-01T12:00:00Z" and body["count"] == 1
