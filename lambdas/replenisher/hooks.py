"""The termination lifecycle hook follows the cluster's groups: every Auto Scaling group tagged
``KubernetesCluster=<cluster>`` gets the hook ``LIFECYCLE_HOOK_NAME`` (transition
``autoscaling:EC2_INSTANCE_TERMINATING``, HeartbeatTimeout ``LIFECYCLE_HOOK_HEARTBEAT_SECONDS``, DefaultResult
``CONTINUE``), created or corrected when it is missing or different.

Why here and not only in the stack: kOps owns the groups. ``kops update cluster`` adds a group for a new instance
group, and deletes and creates a group again when one must be replaced; a hook is part of its group and goes with it
(Auto Scaling "Amazon EC2 Auto Scaling lifecycle hooks"). A list of group names in ``cdk.json`` misses both until the
next deploy. The replenisher already reads the cluster's groups by tag on every invocation (``gather``), so it sees
a new group at its first "Launch Successful" event (a launch in a group this environment has not seen hooked is
always a whole reconcile: ``decide.acknowledged``) or the next tick, and asks for its hook then.

Cost: DescribeLifecycleHooks takes one group a call, so each group is asked once, then again only when its
``CreatedTime`` changed (deleted and created again under the same name) or ``LIFECYCLE_HOOK_RECHECK_SECONDS``
passed (a hook deleted by hand). What was seen is kept per execution environment (``Deps.hooks_seen``): a cold start
asks every group once.

Effects stay small: a failed call is logged and counted (``LifecycleHooksFailed``) and asked again at the next
invocation, never raised (the capacity work of the invocation is done already); a hook put is counted
(``LifecycleHooksPut``) and named in the response (``hooks``). ``DRY_RUN``: read, report "would put", change nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from adapters.aws.autoscaling import TERMINATING
from adapters.aws.ports import HookKeeper
from core.exceptions import AwsRequestError, AwsUnavailableError
from core.settings import ReplenisherSettings
from lambdas.common.telemetry import Telemetry
from lambdas.replenisher.world import Group

DEFAULT_RESULT = "CONTINUE"


@dataclass(frozen=True)
class Seen:
    """A group whose hook was found right (or put): its ``CreatedTime`` then, and when (UTC)."""

    created: str
    checked_at: datetime


def due(groups: Iterable[Group], seen: Mapping[str, Seen], now: datetime, recheck_seconds: int) -> list[str]:
    """The names of the groups to ask about their hook now, in name order: never seen, ``CreatedTime`` changed since
    (the group was deleted and created again), or seen ``recheck_seconds`` ago or longer. Pure."""
    names = []
    for group in groups:
        last = seen.get(group.name)
        if last is None or last.created != group.created or now - last.checked_at >= timedelta(seconds=recheck_seconds):
            names.append(group.name)
    return sorted(names)


def difference(hook: Mapping[str, Any] | None, heartbeat_seconds: int) -> str | None:
    """Why ``hook`` (one element of DescribeLifecycleHooks' ``LifecycleHooks``, None when absent) is not the wanted
    termination hook: ``"missing"``, ``"transition <x>"``, ``"heartbeat <n> s"``, ``"default result <x>"``; None
    when it is. Pure."""
    if hook is None:
        return "missing"
    if hook.get("LifecycleTransition") != TERMINATING:
        return f"transition {hook.get('LifecycleTransition')}"
    if int(hook.get("HeartbeatTimeout", 0)) != heartbeat_seconds:
        return f"heartbeat {hook.get('HeartbeatTimeout')} s"
    if hook.get("DefaultResult") != DEFAULT_RESULT:
        return f"default result {hook.get('DefaultResult')}"
    return None


def ensure_hooks(
    autoscaling: HookKeeper,
    groups: Mapping[str, Group],
    seen: MutableMapping[str, Seen],
    settings: ReplenisherSettings,
    now: datetime,
    telemetry: Telemetry,
    logger: Any,
) -> dict[str, str]:
    """Ask the groups ``due`` about the hook and put it where it is missing or different.

    Args:
        autoscaling: DescribeLifecycleHooks and PutLifecycleHook (``adapters.aws.autoscaling.AutoScaling``).
        groups: the cluster's groups as ``gather`` read them (name -> ``Group``).
        seen: updated in place: groups found right or put are recorded; groups gone are forgotten.
        settings: ``LIFECYCLE_HOOKS`` (False: nothing is done), ``LIFECYCLE_HOOK_NAME``,
            ``LIFECYCLE_HOOK_HEARTBEAT_SECONDS``, ``LIFECYCLE_HOOK_RECHECK_SECONDS``, ``DRY_RUN``.
        now: the invocation's time (UTC).
        telemetry: counts ``LifecycleHooksPut`` and ``LifecycleHooksFailed``.
        logger: the handler's logger.

    Returns:
        Group name -> what happened, for the groups asked: ``"present"``, ``"put (<why>)"``,
        ``"would put (<why>)"`` (dry run), ``"failed: <error>"``. Empty when nothing was due.
    """
    for name in [n for n in seen if n not in groups]:
        del seen[name]
    if not settings.lifecycle_hooks:
        return {}
    results: dict[str, str] = {}
    hook_name, heartbeat = settings.lifecycle_hook_name, settings.lifecycle_hook_heartbeat_seconds
    for name in due(groups.values(), seen, now, settings.lifecycle_hook_recheck_seconds):
        try:
            why = difference(autoscaling.lifecycle_hook(name, hook_name), heartbeat)
            if why is None:
                results[name] = "present"
            elif settings.dry_run:
                results[name] = f"would put ({why})"
                continue
            else:
                autoscaling.put_termination_hook(name, hook_name, heartbeat)
                results[name] = f"put ({why})"
                telemetry.count("LifecycleHooksPut")
                logger.info(f"lifecycle hook {hook_name} put on {name} ({why})", extra={"asg": name})
            seen[name] = Seen(groups[name].created, now)
        except (AwsRequestError, AwsUnavailableError) as err:
            results[name] = f"failed: {err}"
            telemetry.count("LifecycleHooksFailed")
            logger.warning(f"lifecycle hook of {name} not checked: {err}", extra={"asg": name})
    return results
