"""How the CLI reaches the refresher: the deployed Lambda (boto3 ``lambda:InvokeFunction``) or its handler run in
this process against whatever AWS endpoint the environment names (``AWS_ENDPOINT_URL``: the local world's moto)."""

from __future__ import annotations

import base64
import contextlib
import io
import json
from collections.abc import Callable, Mapping
from typing import Any

Invoke = Callable[[dict[str, Any]], dict[str, Any]]


def client_context(caller: str | None) -> str | None:
    """The ``ClientContext`` of an Invoke call naming ``caller`` (base64 JSON ``{"custom": {"caller": ...}}``, which
    the function reads as ``context.client_context.custom`` and logs); None without a caller. Self-reported:
    CloudTrail's Lambda data events record the authenticated caller."""
    if not caller:
        return None
    return base64.b64encode(json.dumps({"custom": {"caller": caller}}).encode()).decode()


def lambda_invoker(function_name: str, client: Any, caller: str | None = None) -> Invoke:
    """Invoke the deployed function synchronously (RequestResponse); returns its JSON response. ``caller`` (this
    CLI's identity, ``sts get-caller-identity``) travels in the call's ``ClientContext`` so the function's log names
    it.

    Raises:
        RuntimeError: the function failed (``FunctionError``), with its error message.
    """
    context = client_context(caller)

    def invoke(payload: dict[str, Any]) -> dict[str, Any]:
        extra = {"ClientContext": context} if context else {}
        out = client.invoke(
            FunctionName=function_name,
            InvocationType="RequestResponse",
            Payload=json.dumps(payload).encode(),
            **extra,
        )
        body = json.loads(out["Payload"].read() or b"null")
        if out.get("FunctionError"):
            raise RuntimeError(f"{function_name} failed: {body}")
        return body if isinstance(body, dict) else {"status": "unknown", "body": body}

    return invoke


def caller_arn(boto3: Any) -> str | None:
    """This CLI's identity (STS GetCallerIdentity ``Arn``), or None when STS cannot say (the invoke still goes)."""
    try:
        return str(boto3.client("sts").get_caller_identity()["Arn"])
    except Exception:  # noqa: BLE001 - naming the caller is best effort; the invocation does not depend on it
        return None


def local_invoker(environ: Mapping[str, str]) -> Invoke:
    """Run the refresher's handler in this process, with its settings from ``environ`` (``RefresherSettings``).

    Raises:
        SettingsError: a setting is missing or invalid.
    """
    import boto3
    from aws_lambda_powertools import Metrics

    from core.settings import RefresherSettings
    from lambdas.refresher.handler import Deps, handle
    from localworld.lambda_context import REFRESHER_FUNCTION, LocalLambdaContext

    settings = RefresherSettings.from_env(environ)
    namespace = environ.get("POWERTOOLS_METRICS_NAMESPACE", "NodeManager")
    deps = Deps.from_session(
        settings, boto3.session.Session(), metrics=Metrics(namespace=namespace, service="refresher")
    )
    return lambda payload: handle(payload, deps, LocalLambdaContext(900, REFRESHER_FUNCTION))


def quiet(invoke: Invoke) -> Invoke:
    """In-process invocations print the handler's JSON log lines on stdout (as Lambda does): keep them off the
    operator's output."""

    def run(payload: dict[str, Any]) -> dict[str, Any]:
        with contextlib.redirect_stdout(io.StringIO()):
            return invoke(payload)

    return run
