"""Fixtures shared by the interruption Lambda's unit tests."""

from tests.unit.lambdas.interruption.test_execute import effects  # noqa: F401  # the moto-backed Effects, reused by test_replacement
