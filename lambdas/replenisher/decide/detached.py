"""Rule 10, detached instances never left running: an instance detached for early replacement (``DETACH#``,
``detached``) is outside every group, so nothing terminates it if the Spot reclaim never comes. Pure.

A record is *due* ``DETACHED_MAX_SECONDS`` after it was recorded (the reclaim comes 2 minutes after the warning),
``intended`` ones too (a detach whose ``detached`` mark was lost: ``SWEPT``).
For a due record, what EC2 says of the instance (asked by ``gather.gather`` for due records only) decides:

- still ``pending``/``running``/``stopping``/``stopped``, tagged ``KubernetesCluster=<cluster>``, and in none of the
  cluster's groups: the record is marked ``terminating``, EC2 TerminateInstances follows, then ``terminated``
  (logged and counted ``DetachedTerminated``; the stack alarms on it). A record found ``terminating`` (a crash after
  the mark) is redone: TerminateInstances is idempotent.
- ``shutting-down``/``terminated``, or unknown to EC2 (terminated more than about an hour ago): ``gone``.
- in one of the cluster's groups again (attached back by someone), or not tagged for this cluster: left alone and
  noted (``protected``): the system acts only on what it verified.

At most ``CLEANUP_LIMIT`` terminations per invocation, shared with rule 9. The node was drained by the Spot
warning's command, whose deadline (2 minutes) passed long before (invariant 3, by policy).
"""

from __future__ import annotations

from datetime import timedelta

from core.detach import DetachState
from core.kops import CLUSTER_TAG
from lambdas.replenisher.decide.builder import Builder
from lambdas.replenisher.plan import MarkDetach, Operation, Reason, TerminateDetached
from lambdas.replenisher.world import Detached

RUNNING = frozenset({"pending", "running", "stopping", "stopped"})
# settled: never looked at again. ``intended`` is not: the detach may have happened with its ``detached`` mark lost
# (the write refused, the function ended, and the redelivered warning acknowledged as late), which leaves a running
# instance outside every group; one whose detach never happened is in its group and left alone.
SWEPT = frozenset({DetachState.TERMINATED.value, DetachState.GONE.value})


def due(record: Detached, b: Builder) -> bool:
    """Whether a record is past its deadline and not settled (``intended``, ``detached`` or ``terminating``)."""
    if record.state in SWEPT or record.recorded_at is None:
        return False
    return b.now - record.recorded_at > timedelta(seconds=b.settings.detached_max_seconds)


def sweep_detached(b: Builder) -> None:
    in_groups: set[str] | None = None  # every instance of the groups, made once a record is due and asked about
    for iid, record in sorted(b.world.detached.items()):
        if not due(record, b) or not record.asked:
            continue
        if in_groups is None:
            in_groups = {i.instance_id for g in b.world.groups.values() for i in g.instances}
        if record.ec2_state is None or record.ec2_state not in RUNNING:
            b.actions.append(
                MarkDetach(iid, DetachState.GONE, f"EC2 says {record.ec2_state or 'unknown'}: reclaimed or terminated")
            )
            continue
        if iid in in_groups or record.cluster_tag != b.settings.cluster_name:
            b.note(
                Reason.PROTECTED,
                f"detached {iid} still {record.ec2_state} past its deadline but "
                + ("back in a group" if iid in in_groups else f"not tagged {CLUSTER_TAG}={b.settings.cluster_name}")
                + ": left alone",
            )
            continue
        if b.cleanups >= b.settings.cleanup_limit:
            b.note(Reason.CLEANUP_LIMIT, f"detached {iid} left for the next invocation")
            continue
        b.cleanups += 1
        age = int((b.now - record.recorded_at).total_seconds()) if record.recorded_at else 0
        why = f"detached from {record.asg_name} {age} s ago and still {record.ec2_state}"
        b.actions.append(MarkDetach(iid, DetachState.TERMINATING, why))
        b.actions.append(TerminateDetached(iid, why))
        b.actions.append(MarkDetach(iid, DetachState.TERMINATED, "terminated by the sweep"))
        b.operations.add(Operation.SURPLUS_CLEANUP)
