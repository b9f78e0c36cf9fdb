"""The local Lambda context: the function it stands for, and remaining time counting down."""

from __future__ import annotations

from localworld.lambda_context import REFRESHER_FUNCTION, LocalLambdaContext


def test_context_names_the_function_and_counts_down() -> None:
    context = LocalLambdaContext(2, REFRESHER_FUNCTION)
    assert context.function_name == "node-manager-refresher"
    assert context.invoked_function_arn.endswith(":function:node-manager-refresher")
    assert 0 < context.get_remaining_time_in_millis() <= 2000
    assert LocalLambdaContext(0, REFRESHER_FUNCTION).get_remaining_time_in_millis() == 0
    assert context.aws_request_id != LocalLambdaContext(2, REFRESHER_FUNCTION).aws_request_id


def test_it_is_the_powertools_context_the_handlers_declare() -> None:
    """The handlers are typed ``LambdaContext`` (Powertools); the local one is one, filled as the runtime fills it."""
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from lambdas.common.handler import direct_caller

    context = LocalLambdaContext(2, REFRESHER_FUNCTION)
    assert isinstance(context, LambdaContext)
    assert (context.function_version, context.memory_limit_in_mb) == ("$LATEST", 256)
    assert context.log_group_name == "/aws/lambda/node-manager-refresher"
    assert context.client_context is None and direct_caller(context) is None
