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
