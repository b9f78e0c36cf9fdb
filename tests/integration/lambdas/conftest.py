"""Fixtures of the Lambdas' end-to-end tests on moto: ``world``, the interruption Lambda's test world
(``interruption_world``), requested by name by the interruption, scope and lifecycle-event tests."""

from tests.integration.lambdas.interruption_world import world  # noqa: F401 - a fixture, requested by name
