"""How the CLI reaches the refresher: the deployed Lambda (boto3 ``lambda:InvokeFunction``) or its handler run in
this process against whatever AWS endpoint the environment names (``AWS_ENDPOINT_URL``: the local world's moto)."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable, Mapping
from typing import Any

Invoke = Callable[[dict[str, Any]], dict[str, Any]]


def lambda_invoker(function_name: str, client: Any) -> Invoke:
    """Invoke the deployed function synchronously (RequestResponse); returns its JSON response.

    Raises:
        RuntimeError: the function failed (``FunctionError``), with its error message.
    """

    def invoke(payload: dict[str, Any]) -> dict[str, Any]:
        out = client.invoke(
            FunctionName=function_name, InvocationType="RequestResponse", Payload=json.dumps(payload).encode()
        )
        body = json.loads(out["Payload"].read() or b"null")
        if out.get("FunctionError"):
            raise RuntimeError(f"{function_name} failed: {body}")
        return body if isinstance(body, dict) else {"status": "unknown", "body": body}

    return invoke


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
