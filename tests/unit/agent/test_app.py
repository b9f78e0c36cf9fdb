"""``python -m agent`` refuses to start, with exit code 2 and a log line naming the setting, when misconfigured."""

from __future__ import annotations

import pytest

from agent.app import main

BASE = {
    "CLUSTER_NAME": "demo.k8s.local",
    "TABLE_NAME": "state",
    "QUEUE_URL": "https://sqs.example/q",
    "AWS_REGION": "us-east-1",
}


@pytest.mark.parametrize(
    "env, named",
    [
        ({}, "CLUSTER_NAME"),
        ({**BASE, "SQS_VISIBILITY_TIMEOUT_SECONDS": "30", "STALE_RUNNING_SECONDS": "10"}, "STALE_RUNNING_SECONDS"),
        ({**BASE, "KUBECONFIG": "/nonexistent/kubeconfig"}, "KUBECONFIG"),
    ],
)
def test_a_misconfigured_agent_exits_2_naming_the_setting(
    env: dict[str, str], named: str, caplog: pytest.LogCaptureFixture
) -> None:
    assert main(env) == 2
    assert "cannot start" in caplog.text and named in caplog.text


def test_without_a_kubeconfig_it_needs_to_run_in_a_pod(caplog: pytest.LogCaptureFixture) -> None:
    # no KUBECONFIG and no service account environment (KUBERNETES_SERVICE_HOST): not in a cluster
    assert main(dict(BASE)) == 2
    assert "KUBECONFIG" in caplog.text
