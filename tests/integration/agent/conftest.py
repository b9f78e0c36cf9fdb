"""The agent's tests on the local world: ``engine``, a drain engine with the agent's own identity and short eviction
backoffs (``drain_helpers.Backoff``), requested by name by the drain tests."""

from __future__ import annotations

import pytest

from agent.drain.engine import DrainEngine
from agent.events import NodeEventRecorder
from agent.kube.client import KubeAdapter
from localworld.world import LocalWorld
from tests.integration.agent.drain_helpers import Backoff


@pytest.fixture
def engine(world: LocalWorld) -> DrainEngine:
    """The engine as the agent builds it, authenticated as the agent (system:serviceaccount:node-manager:agent)."""
    kube = KubeAdapter(world.agent_api)
    return DrainEngine(kube, Backoff(), events=NodeEventRecorder(kube, host="test-agent"))
