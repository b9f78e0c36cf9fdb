"""The Lambda functions: event parsing (``lambdas.events``) and one package per function (``lambdas.interruption``).

Each function's package follows the same flow: parse the event into one internal type, decide a plan with a pure
function, apply it with one executor, and wire clients and settings in its ``handler`` module.
"""
