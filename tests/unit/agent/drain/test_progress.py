"""The drain's progress state machine (``agent.drain.progress``): eviction answers, watch events, snapshots."""

from __future__ import annotations

from datetime import UTC, datetime

from agent.drain.policy import Grace, GraceSource, PodAction, plan_drain
from agent.drain.progress import DrainProgress, EvictionUpdate
from agent.kube.eviction import (
    EvictionResponse,
    EvictionStatus,
)
from agent.kube.views import PodEvent, PodView
from core.model import DrainOptions

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def pod(name: str, uid: str | None = None, **extra: object) -> PodView:
    return PodView(namespace="ns", name=name, uid=uid or f"uid-{name}", **extra)


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


def test_outcome_names_the_grace_of_the_accepted_request() -> None:
    progress = make_progress()
    capped = Grace(109, 109, GraceSource.DEADLINE)
    blocked = EvictionResponse(EvictionStatus.BLOCKED, 429, "disruption budget", pdb_name="web-pdb")
    # a refused request's grace is not what the pod got
    progress.apply_update(
        EvictionUpdate("ns/web", 1, blocked, final=False, at=T0, grace=Grace(30, None, GraceSource.POD))
    )
    progress.apply_update(
        EvictionUpdate("ns/web", 2, EvictionResponse(EvictionStatus.EVICTED, 201), True, T0, grace=capped)
    )
    past_pdb = Grace(25, 25, GraceSource.PDB_DEADLINE)
    progress.apply_update(
        EvictionUpdate("ns/db", 3, EvictionResponse(EvictionStatus.EVICTED, 200), True, T0, grace=past_pdb)
    )
    outcomes = {o.name: o for o in progress.outcomes()}
    assert (outcomes["web"].grace_seconds, outcomes["web"].grace_source) == (109, GraceSource.DEADLINE)
    assert (outcomes["db"].grace_seconds, outcomes["db"].grace_source) == (25, GraceSource.PDB_DEADLINE)
    # nothing accepted (or a finished pod's plain DELETE): no grace named
    assert outcomes["leaving"].grace_seconds is None and outcomes["leaving"].grace_source is None
    assert outcomes["ds"].grace_source is None


def test_conclude_and_refuse_fill_the_result_from_the_progress() -> None:
    from agent.drain.progress import conclude, refuse
    from agent.drain.results import NodeCommandResult
    from core.model import CommandKind, CommandStatus

    def result() -> NodeCommandResult:
        return NodeCommandResult(
            command_id="c",
            kind=CommandKind.DRAIN,
            instance_id="i-1",
            node_name="n",
            status=CommandStatus.SUCCEEDED,
            started_at=T0,
            finished_at=T0,
        )

    progress = make_progress()
    timed_out = result()
    conclude(timed_out, progress, "n")
    assert timed_out.status is CommandStatus.TIMED_OUT and len(timed_out.remaining) == 4
    progress.apply_snapshot([])
    done = result()
    conclude(done, progress, "n")
    assert done.status is CommandStatus.SUCCEEDED and done.message.startswith("drained node n: 2 evicted")
    failed_progress = make_progress()
    failed_progress.apply_update(EvictionUpdate("ns/web", 1, None, final=True, error="HTTP 403: no"))
    failed = result()
    conclude(failed, failed_progress, "n")
    assert failed.status is CommandStatus.FAILED and failed.errors == ["ns/web: HTTP 403: no"]
    plan = plan_drain([pod("bare")], DrainOptions(force=False))
    refused = result()
    refuse(refused, plan, DrainProgress(plan), "n")
    assert refused.status is CommandStatus.FAILED and refused.remaining[0].why.startswith("refused: unmanaged")


def test_a_pod_placed_on_the_node_after_its_cordon_is_tracked_to_be_evicted_and_others_are_not() -> None:
    from agent.kube.views import OwnerRef

    progress = make_progress()
    rs = (OwnerRef("ReplicaSet", "rs", True),)
    late = progress.arrival(PodEvent("ADDED", pod("web-late", owners=rs)), DrainOptions())
    assert (
        late is not None
        and late.disposition.action is PodAction.EVICT
        and "after the cordon" in late.disposition.reason
    )
    assert "ns/web-late" in progress.states and not progress.settled  # the drain waits for it too
    assert progress.arrival(PodEvent("MODIFIED", pod("web-late", owners=rs)), DrainOptions()) is None  # once
    assert progress.arrival(PodEvent("MODIFIED", pod("web", owners=rs)), DrainOptions()) is None  # listed already
    ignored = [
        PodEvent("ADDED", pod("ds-2", owners=(OwnerRef("DaemonSet", "ds", True),))),  # stays, as listed ones do
        PodEvent("ADDED", pod("going", owners=rs, deletion_timestamp=T0)),
        PodEvent("ADDED", pod("job-done", owners=rs, phase="Succeeded")),
        PodEvent("DELETED", pod("gone", owners=rs)),
        PodEvent("BOOKMARK"),
    ]
    assert [progress.arrival(e, DrainOptions()) for e in ignored] == [None] * len(ignored)
    progress.apply_event(PodEvent("DELETED", pod("web-late", owners=rs)))
    assert progress.states["ns/web-late"].gone


def test_a_pod_gone_before_its_answer_is_named_with_the_announced_grace() -> None:
    """The watch's DELETED event can reach the drain before the worker's answer (two threads, one inbox): the
    announcement sent before the request names what removed the pod (the flaky integration test
    ``test_a_spot_warning_after_a_rebalance_drain_tightens_it_to_the_spot_deadline[pdb-delete-at-the-deadline]``)."""
    from agent.drain.progress import counts_text

    progress = make_progress()
    past_pdb = Grace(0, 0, GraceSource.PDB_DEADLINE)
    progress.apply_update(EvictionUpdate("ns/web", 4, None, final=False, at=T0, grace=past_pdb, sent=True))
    assert progress.states["ns/web"].grace is None  # in flight: nothing named while the pod is there
    assert "deleted past" not in counts_text(progress)
    progress.apply_event(PodEvent("DELETED", pod("web")))
    assert progress.states["ns/web"].grace == past_pdb
    assert "1 deleted past their PodDisruptionBudget at the deadline" in counts_text(progress)
    # a pod found gone by a re-list before its answer likewise
    progress.apply_update(EvictionUpdate("ns/db", 2, None, final=False, at=T0, grace=past_pdb, sent=True))
    progress.apply_snapshot([])
    assert progress.states["ns/db"].grace == past_pdb


def test_a_refused_request_after_its_announcement_names_no_grace() -> None:
    progress = make_progress()
    capped = Grace(20, 20, GraceSource.DEADLINE)
    blocked = EvictionResponse(EvictionStatus.BLOCKED, 429, "disruption budget", pdb_name="web-pdb")
    progress.apply_update(EvictionUpdate("ns/web", 1, None, final=False, at=T0, grace=capped, sent=True))
    progress.apply_update(EvictionUpdate("ns/web", 1, blocked, final=False, at=T0))
    progress.apply_event(PodEvent("DELETED", pod("web")))  # deleted by someone else after the refusal
    assert progress.states["ns/web"].grace is None
    progress = make_progress()
    # an accepted eviction's grace is kept whatever is announced after it (a retry racing the acceptance)
    progress.apply_update(
        EvictionUpdate("ns/web", 2, EvictionResponse(EvictionStatus.EVICTED, 201), True, T0, grace=capped)
    )
    progress.apply_update(
        EvictionUpdate("ns/web", 3, None, False, T0, grace=Grace(0, 0, GraceSource.PDB_DEADLINE), sent=True)
    )
    assert progress.states["ns/web"].grace == capped


def test_a_pod_recreated_under_a_tracked_name_is_an_arrival_and_its_predecessor_is_kept() -> None:
    from agent.kube.views import OwnerRef

    progress = make_progress()
    sts = (OwnerRef("StatefulSet", "db", True),)
    evicted = EvictionResponse(EvictionStatus.EVICTED, 201)
    progress.apply_update(EvictionUpdate("ns/db", 1, evicted, final=True, at=T0, uid="uid-db"))
    again = PodEvent("ADDED", pod("db", uid="uid-db-2", owners=sts))
    progress.apply_event(again)  # the old uid counts as gone, as before
    recreated = progress.arrival(again, DrainOptions())
    assert recreated is not None and recreated.pod.uid == "uid-db-2" and progress.states["ns/db"] is recreated
    assert not progress.settled  # the drain waits for the new pod too
    # a late update of the old pod's worker is not the new pod's
    progress.apply_update(
        EvictionUpdate("ns/db", 2, EvictionResponse(EvictionStatus.GONE, 404), final=True, uid="uid-db")
    )
    assert not recreated.gone and recreated.attempts == 0
    db = [o for o in progress.outcomes() if o.name == "db"]
    assert [(o.uid, o.gone) for o in db] == [("uid-db", True), ("uid-db-2", False)]
    # the same pod seen again is no second arrival
    assert progress.arrival(PodEvent("MODIFIED", pod("db", uid="uid-db-2", owners=sts)), DrainOptions()) is None


def test_a_pod_still_tracked_is_no_arrival_under_another_uid_until_it_is_gone() -> None:
    from agent.kube.views import OwnerRef

    progress = make_progress()
    rs = (OwnerRef("ReplicaSet", "rs", True),)
    # an event of another uid that was not applied (the tracked one not gone): nothing replaces it
    assert progress.arrival(PodEvent("ADDED", pod("web", uid="other", owners=rs)), DrainOptions()) is None
