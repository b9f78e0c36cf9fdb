"""``node-manager plan``: what each Lambda would do now, computed by the Lambdas' own code (gather, decide, plan)
with their dry-run semantics, in this process, against the AWS (or moto) the environment reaches.

- replenisher: its periodic tick ("Scheduled Event") handled with ``DRY_RUN=true``: the actions that change capacity
  or send commands are planned, not done (``lambdas.common.execute``; notes and acknowledgements are still recorded,
  as the deployed function does under ``DRY_RUN``). No lock is taken.
- refresher: a refresh request with ``dry_run`` (the selection its schedule would make: ``REFRESH_MAX_AGE`` of its
  settings): the steps a run would take, or why one would be refused.
- interruption: acts only on events (Spot warnings, rebalance recommendations, lifecycle hooks, state changes); with
  none there is nothing to plan, which the answer says.

Settings come from the environment as the deployed functions read them (``CLUSTER_NAME``, ``TABLE_NAME``,
``QUEUE_URL``, ...; README "Settings"); credentials and region from the default AWS chain (``AWS_ENDPOINT_URL`` for
moto).
"""

from __future__ import annotations

import contextlib
import io
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

# A Scheduled Event's envelope must carry the deployment's account (``lambdas.events.scope``); when ACCOUNT_ID is not
# set the plan uses this placeholder for both the Lambda's scope and the event, so the check passes as it does for
# the real tick.
PLACEHOLDER_ACCOUNT = "000000000000"


def _metrics(environ: Mapping[str, str], service: str) -> Any:
    """Powertools ``Metrics`` as the stack configures them (``POWERTOOLS_METRICS_NAMESPACE``, default NodeManager);
    a dry run flushes none."""
    from aws_lambda_powertools import Metrics

    return Metrics(namespace=environ.get("POWERTOOLS_METRICS_NAMESPACE", "NodeManager"), service=service)


def tick_event(account: str, region: str, now: datetime) -> dict[str, Any]:
    """The "Scheduled Event" of the replenisher's tick rule (shape: ``lambdas/events/scheduled.py``)."""
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": account,
        "time": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": region,
        "resources": [f"arn:aws:events:{region}:{account}:rule/node-manager-plan"],
        "detail": {},
    }


def plan_replenisher(environ: Mapping[str, str], session: Any) -> dict[str, Any]:
    """The replenisher's dry-run answer to a tick now (``{"status": "dry_run" | "noted", "actions": [...]}``).

    Raises:
        SettingsError: a setting is missing or invalid.
    """
    from core.model import utcnow
    from core.settings import ReplenisherSettings
    from lambdas.common.handler import session_clients
    from lambdas.replenisher.handler import Deps, handle

    settings = ReplenisherSettings.from_env(environ).model_copy(update={"dry_run": True})
    deps = Deps.from_clients(
        settings, **session_clients(session), metrics=_metrics(environ, "replenisher"), region=session.region_name
    )
    account = deps.scope.account or PLACEHOLDER_ACCOUNT
    region = deps.scope.region or session.region_name or "us-east-1"
    deps.scope = replace(deps.scope, account=account, region=region)
    now = utcnow()
    with contextlib.redirect_stdout(io.StringIO()):  # the handler's JSON log lines, as in Lambda
        return handle(tick_event(account, region, now), deps, now)


def plan_refresher(environ: Mapping[str, str], session: Any, cluster: str) -> dict[str, Any]:
    """The refresher's dry-run plan of the refresh its schedule would start now.

    Raises:
        SettingsError: a setting is missing or invalid.
    """
    from core.settings import RefresherSettings
    from lambdas.common.handler import session_clients
    from lambdas.refresher.handler import Deps, handle

    settings = RefresherSettings.from_env(environ)
    deps = Deps.from_clients(
        settings, **session_clients(session), metrics=_metrics(environ, "refresher"), region=session.region_name
    )
    with contextlib.redirect_stdout(io.StringIO()):
        return handle({"action": "refresh", "cluster": cluster, "dry_run": True}, deps, None)


def plan_all(environ: Mapping[str, str], session: Any, cluster: str) -> dict[str, Any]:
    """Each Lambda's plan, keyed by its name. A Lambda whose settings are incomplete in ``environ`` answers
    ``{"status": "unavailable", "error": ...}`` so the other's plan is still shown.

    Raises:
        SettingsError: neither plan could be made (the first error: a shared setting such as ``TABLE_NAME``).
    """
    from core.exceptions import SettingsError

    env = {**environ, "CLUSTER_NAME": cluster}
    out: dict[str, Any] = {}
    errors: list[SettingsError] = []
    plans: dict[str, Callable[[], dict[str, Any]]] = {
        "replenisher": lambda: plan_replenisher(env, session),
        "refresher": lambda: plan_refresher(env, session, cluster),
    }
    for name, make in plans.items():
        try:
            out[name] = make()
        except SettingsError as err:
            errors.append(err)
            out[name] = {"status": "unavailable", "error": str(err)}
    if len(errors) == 2:
        raise errors[0]
    out["interruption"] = {
        "status": "idle",
        "reason": "acts only on events (Spot warnings, rebalance recommendations, lifecycle hooks): none to plan",
    }
    return out
