"""The agent's side of ASG termination lifecycle hooks: heartbeats while a drain runs, CONTINUE when it ends.

The interruption Lambda records each termination lifecycle action of a managed group as ``HOOK#<instance-id>``
(``core.lifecycle``). For any drain of an instance with a pending action (a Spot drain, the Lambda's own
``lifecycle-<event id>`` drain, a refresher's drain):

- while it runs, ``RecordLifecycleActionHeartbeat`` every ``LIFECYCLE_HEARTBEAT_SECONDS`` keeps Auto Scaling from
  finishing the action by its heartbeat timeout, up to a cap: the drain's deadline (after it the drain ends
  ``timed_out`` anyway; Auto Scaling's own cap is 100 heartbeat timeouts or 48 hours);
- when it ends, whatever its status (succeeded, failed, timed_out, skipped because the instance has no node),
  ``CompleteLifecycleAction`` with ``CONTINUE``: the instance is going anyway, the hook only bought the drain its
  time. The claim on the ``HOOK#`` item makes sure only one finisher calls it.

Completing goes through ``adapters.dynamo.hooks.finish``, the one finisher the interruption Lambda uses too. Auto
Scaling's answer ``ValidationError`` "No active Lifecycle Action found" (the action timed out or was completed by
someone else) is final: the item is marked ``gone``. Throttling and other errors put the item back to ``pending``
(the next drain end, or the hook's default result, finishes it); when even that write fails, the claim expires after
``core.lifecycle.CLAIM_EXPIRY_SECONDS`` and the next finisher takes it over, so an action is never left claimed
forever. Nothing here raises: every error (botocore's, translated by ``adapters.aws.calls``, an unparsable answer
included; the table's; anything else) is logged and counted in ``loop_errors{loop="lifecycle"}``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from adapters.aws.ports import LifecycleActions
from adapters.dynamo.hooks import Finish, action_of, finish, get_hook, settle_hook
from adapters.dynamo.table import Table
from agent.metrics import AgentMetrics
from core.exceptions import AwsRequestError, AwsUnavailableError
from core.lifecycle import HookState, claimable
from core.model import utcnow

log = logging.getLogger(__name__)


class HookFinisher:
    """Heartbeats and completes the pending lifecycle action of an instance.

    Args:
        store: the cluster's table access (``HOOK#`` items).
        autoscaling: the Auto Scaling adapter (``adapters.aws.autoscaling.AutoScaling``).
        identity: this agent (recorded as the claimer).
        metrics: counts calls by result.
        clock: current UTC time.
    """

    def __init__(
        self,
        store: Table,
        autoscaling: LifecycleActions,
        identity: str,
        metrics: AgentMetrics | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.store = store
        self.autoscaling = autoscaling
        self.identity = identity
        self.metrics = metrics
        self.clock = clock

    def pending(self, instance_id: str) -> dict[str, Any] | None:
        """The ``HOOK#`` item of ``instance_id`` when it may be claimed (pending, or a claim that expired), None
        when there is none (or on a read error)."""
        try:
            item = get_hook(self.store, instance_id)
        except Exception as err:
            self._error(err)
            log.exception("could not read the lifecycle action instance_id=%s", instance_id)
            return None
        return item if item is not None and claimable(item, self.clock().timestamp()) else None

    def heartbeat(self, instance_id: str) -> bool:
        """RecordLifecycleActionHeartbeat for the pending action of ``instance_id``; True when recorded."""
        item = self.pending(instance_id)
        if item is None:
            return False
        action = action_of(item)
        try:
            recorded = self.autoscaling.record_heartbeat(action)
        except Exception as err:
            self._count("heartbeat", "error")
            self._error(err)
            log.warning(
                "lifecycle heartbeat failed instance_id=%s hook=%s error=%s",
                instance_id,
                action.hook_name,
                err,
                exc_info=not isinstance(err, (AwsUnavailableError, AwsRequestError)),
            )
            return False
        if not recorded:
            self._count("heartbeat", "gone")
            self._settle(instance_id, action.token, HookState.GONE, "no active lifecycle action")
            log.warning(
                "lifecycle heartbeat refused instance_id=%s hook=%s: action gone", instance_id, action.hook_name
            )
            return False
        self._count("heartbeat", "ok")
        log.info(
            "lifecycle action heartbeat recorded instance_id=%s hook=%s asg=%s",
            instance_id,
            action.hook_name,
            action.asg_name,
        )
        return True

    def complete(self, instance_id: str, why: str, only: Callable[[Mapping[str, Any]], bool] | None = None) -> bool:
        """CompleteLifecycleAction(CONTINUE) for the pending action of ``instance_id``, if this agent wins the
        claim. Returns True when Auto Scaling accepted it. ``only``: the action is completed only when it holds for
        its ``HOOK#`` item (the claim is then taken on that item's token, so it is that very action)."""
        item = self.pending(instance_id)
        if item is None or (only is not None and not only(item)):
            return False
        action = action_of(item)
        try:
            outcome = finish(
                self.store, action, self.identity, self.autoscaling.complete_lifecycle_action, why, now=self.clock()
            )
        except (AwsUnavailableError, AwsRequestError) as err:
            self._count("complete", "error")
            self._error(err)
            log.warning(
                "CompleteLifecycleAction failed instance_id=%s hook=%s error=%s", instance_id, action.hook_name, err
            )
            return False
        except Exception as err:
            self._count("complete", "error")
            self._error(err)
            log.exception("could not finish the lifecycle action instance_id=%s", instance_id)
            return False
        if outcome is Finish.CLAIMED_ELSEWHERE:
            log.info("lifecycle action claimed by someone else instance_id=%s", instance_id)
            return False
        if outcome is Finish.GONE:
            self._count("complete", "gone")
            log.warning(
                "CompleteLifecycleAction refused instance_id=%s hook=%s: action gone", instance_id, action.hook_name
            )
            return False
        self._count("complete", "ok")
        log.info(
            "lifecycle action completed with CONTINUE instance_id=%s hook=%s asg=%s why=%s",
            instance_id,
            action.hook_name,
            action.asg_name,
            why,
        )
        return True

    def _settle(self, instance_id: str, token: str, state: HookState, detail: str) -> None:
        try:
            settle_hook(self.store, instance_id, token, state, detail, now=self.clock())
        except Exception as err:
            self._error(err)
            log.exception("could not record the lifecycle action's end instance_id=%s", instance_id)

    def _error(self, err: BaseException) -> None:
        if self.metrics is not None:
            self.metrics.loop_error("lifecycle", err)

    def _count(self, action: str, result: str) -> None:
        if self.metrics is not None:
            self.metrics.lifecycle_actions.labels(action=action, result=result).inc()
