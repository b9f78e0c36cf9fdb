"""Fixtures of the interruption Lambda's end-to-end tests on moto: ``world``, its test world (``world.py``),
requested by name by the handler, scope and lifecycle-event tests (the rest of ``tests/integration`` uses the
local world's ``world`` of ``tests/conftest.py``)."""

from tests.integration.lambdas.interruption.world import world  # noqa: F401 - a fixture, requested by name
