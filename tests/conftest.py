"""Shared fixtures: the local test world (moto server + kube-apiserver/etcd + cluster simulator).

- ``local_world`` (session): started once per test session, stopped at the end (no process left behind).
- ``world`` (function): ``local_world`` reset before the test (moto and Kubernetes emptied, processes killed).
- ``cluster`` (function): ``world.setup_cluster()`` (3 masters + 9 Spot workers in us-east-1a/b/c, simulator running,
  nodes Ready); the simulator and spawned processes are stopped after the test.

Tests that use these fixtures get the ``world`` marker automatically (``-m "not world"`` runs the rest). When the
kube assets are missing the fixtures fail with the install hint (never a silent skip).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # tests import core/, agent/, lambdas/, localworld/ from the repo root
    sys.path.insert(0, str(ROOT))

from localworld.aws import serialise_dynamodb  # noqa: E402 - after the sys.path insert above
from localworld.cluster import ClusterInfo  # noqa: E402 - after the sys.path insert above
from localworld.kube_processes import KubeAssetsMissingError, find_assets  # noqa: E402 - after the sys.path insert above
from localworld.world import LocalWorld  # noqa: E402 - after the sys.path insert above

# the root `world` and `cluster` need `local_world`; a directory's own fixture named `world` (tests/unit/agent's, on
# moto) does not, and its tests are no world tests
WORLD_FIXTURES = {"local_world"}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "world: needs the local world (moto server, kube-apiserver + etcd)")
    config.addinivalue_line("markers", "slow: takes more than a few seconds")
    # every test's moto DynamoDB (in-process ``mock_aws`` too) applies each request atomically, as DynamoDB does: moto
    # alone let two of eight threads racing for one control-plane slot both win (1 run in 3 on a slow machine)
    serialise_dynamodb()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if WORLD_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.world)


# What a test must not leave in the process environment: a boto3 client built later reads it, and with mock_aws
# active a request to the world's moto server is not intercepted, so a unit test would answer from the wrong moto.
_PROCESS_WIDE_AWS = ("AWS_ENDPOINT_URL", "AWS_DEFAULT_REGION", "AWS_REGION", "AWS_CONFIG_FILE")


@pytest.fixture(autouse=True)
def _no_leaked_aws_environment(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail the test that leaves an AWS endpoint or region in ``os.environ`` (monkeypatch undoes its own first)."""
    before = {key: os.environ.get(key) for key in _PROCESS_WIDE_AWS}
    yield
    after = {key: os.environ.get(key) for key in _PROCESS_WIDE_AWS}
    if after != before:
        leaked = {key: after[key] for key in _PROCESS_WIDE_AWS if after[key] != before[key]}
        for key, value in before.items():  # put it back so the tests after this one are not failed too
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        pytest.fail(f"{request.node.nodeid} left {leaked} in os.environ", pytrace=False)


@pytest.fixture(scope="session")
def local_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalWorld]:
    try:
        find_assets()
    except KubeAssetsMissingError as err:
        pytest.fail(f"local world unavailable: {err}", pytrace=False)
    world = LocalWorld(log_dir=tmp_path_factory.mktemp("world-logs"))
    world.start()
    try:
        yield world
    finally:
        world.stop()


@pytest.fixture
def world(local_world: LocalWorld) -> Iterator[LocalWorld]:
    local_world.reset()
    try:
        yield local_world
    finally:
        local_world.stop_processes()
        local_world.stop_simulator()


@pytest.fixture
def cluster(world: LocalWorld) -> Iterator[ClusterInfo]:
    info = world.setup_cluster()
    try:
        yield info
    finally:
        world.stop_processes()
        world.stop_simulator()
