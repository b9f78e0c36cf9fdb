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

Auto Scaling's answer ``ValidationError`` "No active Lifecycle Action found" (the action timed out or was
completed by someone else) is final: the item is marked ``gone``. Throttling and other errors put the item back to
``pending`` (the next drain end, or the hook's default result, finishes it). Nothing here raises.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from adapters.dynamo.hooks import claim_hook, get_hook, settle_hook
from adapters.dynamo.store import Store
from agent.metrics import AgentMetrics
from core.lifecycle import HookState
from core.model import utcnow

log = logging.getLogger(__name__)

CONTINUE = "CONTINUE"


def action_gone(err: ClientError) -> bool:
    """Auto Scaling no longer has this action (timed out, completed, or its instance is gone). Pure."""
    error = err.response.get("Error", {})
    return error.get("Code") == "ValidationError" and "No active Lifecycle Action" in str(error.get("Message", ""))


class LifecycleHooks:
    """Heartbeats and completes the pending lifecycle action of an instance.

    Args:
        store: the cluster's table access (``HOOK#`` items).
        autoscaling: a boto3 ``autoscaling`` client.
        identity: this agent (recorded as the claimer).
        metrics: counts calls by result.
        clock: current UTC time.
    """

    def __init__(
        self,
        store: Store,
        autoscaling: Any,
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
        """The pending ``HOOK#`` item of ``instance_id``, None when there is none (or on a read error)."""
        try:
            item = get_hook(self.store, instance_id)
        except Exception:
            log.exception("could not read the lifecycle action instance_id=%s", instance_id)
            return None
        return item if item is not None and item.get("state") == HookState.PENDING else None

    def heartbeat(self, instance_id: str) -> bool:
        """RecordLifecycleActionHeartbeat for the pending action of ``instance_id``; True when recorded."""
        item = self.pending(instance_id)
        if item is None:
            return False
        try:
            self.autoscaling.record_lifecycle_action_heartbeat(
                LifecycleHookName=item["hook_name"],
                AutoScalingGroupName=item["asg_name"],
                LifecycleActionToken=item["token"],
                InstanceId=instance_id,
            )
        except ClientError as err:
            gone = action_gone(err)
            self._count("heartbeat", "gone" if gone else "error")
            if gone:
                self._settle(instance_id, str(item["token"]), HookState.GONE, str(err))
            log.warning(
                "lifecycle heartbeat refused instance_id=%s hook=%s error=%s", instance_id, item["hook_name"], err
            )
            return False
        except BotoCoreError as err:
            self._count("heartbeat", "error")
            log.warning("lifecycle heartbeat failed instance_id=%s error=%s", instance_id, err)
            return False
        self._count("heartbeat", "ok")
        log.info(
            "lifecycle action heartbeat recorded instance_id=%s hook=%s asg=%s",
            instance_id,
            item["hook_name"],
            item["asg_name"],
        )
        return True

    def complete(self, instance_id: str, why: str) -> bool:
        """CompleteLifecycleAction(CONTINUE) for the pending action of ``instance_id``, if this agent wins the
        claim. Returns True when Auto Scaling accepted it."""
        item = self.pending(instance_id)
        if item is None:
            return False
        token = str(item["token"])
        try:
            if not claim_hook(self.store, instance_id, token, self.identity, now=self.clock()):
                log.info("lifecycle action claimed by someone else instance_id=%s", instance_id)
                return False
        except Exception:
            log.exception("could not claim the lifecycle action instance_id=%s", instance_id)
            return False
        try:
            self.autoscaling.complete_lifecycle_action(
                LifecycleHookName=item["hook_name"],
                AutoScalingGroupName=item["asg_name"],
                LifecycleActionToken=token,
                LifecycleActionResult=CONTINUE,
                InstanceId=instance_id,
            )
        except ClientError as err:
            gone = action_gone(err)
            self._count("complete", "gone" if gone else "error")
            self._settle(instance_id, token, HookState.GONE if gone else HookState.PENDING, str(err))
            log.warning(
                "CompleteLifecycleAction refused instance_id=%s hook=%s gone=%s error=%s",
                instance_id,
                item["hook_name"],
                gone,
                err,
            )
            return False
        except BotoCoreError as err:
            self._count("complete", "error")
            self._settle(instance_id, token, HookState.PENDING, str(err))
            log.warning("CompleteLifecycleAction failed instance_id=%s error=%s", instance_id, err)
            return False
        self._count("complete", "ok")
        self._settle(instance_id, token, HookState.COMPLETED, why)
        log.info(
            "lifecycle action completed with CONTINUE instance_id=%s hook=%s asg=%s why=%s",
            instance_id,
            item["hook_name"],
            item["asg_name"],
            why,
        )
        return True

    def _settle(self, instance_id: str, token: str, state: str, detail: str) -> None:
        try:
            settle_hook(self.store, instance_id, token, state, detail, now=self.clock())
        except Exception:
            log.exception("could not record the lifecycle action's end instance_id=%s", instance_id)

    def _count(self, action: str, result: str) -> None:
        if self.metrics is not None:
            self.metrics.lifecycle_actions.labels(action=action, result=result).inc()
