"""The operator CLI's exit codes and rendering, with the invocation replaced by a recorded answer."""

from __future__ import annotations

from cli.main import main


def _run(response, *args):
    lines: list[str] = []
    sent: list[dict] = []

    def invoker(payload):
        sent.append(payload)
        return response

    code = main(
        ["--function-name", "fn", "--cluster", "demo.k8s.local", *args], environ={}, invoker=invoker, out=lines.append
    )
    return code, "\n".join(lines), sent


def test_a_dry_run_that_a_real_run_would_refuse_fails_and_says_why():
    code, text, sent = _run(
        {"status": "dry_run", "refusal": "unknown instance groups: nope", "actions": []},
        "refresh",
        "--dry-run",
        "--all",
        "--instance-group",
        "nope",
    )
    assert code == 1
    assert "refusal: unknown instance groups: nope" in text
    assert sent[0]["dry_run"] is True and sent[0]["instance_groups"] == ["nope"]


def test_a_clean_dry_run_succeeds():
    code, text, _ = _run({"status": "dry_run", "actions": []}, "refresh", "--dry-run", "--all")
    assert code == 0 and "status: dry_run" in text


def test_a_rejected_payload_fails():
    code, text, _ = _run(
        {"status": "rejected", "error": "max_surge: must be >= 1"}, "refresh", "--all", "--max-surge", "0"
    )
    assert code == 1 and "max_surge" in text


def test_the_cluster_is_required():
    assert main(["--function-name", "fn", "status"], environ={}, invoker=lambda p: {}, out=lambda s: None) == 2
