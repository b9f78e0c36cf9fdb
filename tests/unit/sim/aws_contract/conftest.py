"""The side a contract test runs on: each test asking for ``side`` runs twice, on moto and on the simulation."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.unit.sim.aws_contract.sides import Side, moto_side, sim_side


@pytest.fixture(params=["moto", "sim"])
def side(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Side]:
    if request.param == "sim":
        yield sim_side()
        return
    with moto_side(monkeypatch) as moto:
        yield moto
