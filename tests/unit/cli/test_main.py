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


def _main(response, argv, environ=None):
    """Run main with a recorded answer; returns (code, stdout lines, stderr lines, payloads sent)."""
    out: list[str] = []
    err: list[str] = []
    sent: list[dict] = []

    def invoker(payload):
        sent.append(payload)
        return response(payload) if callable(response) else response

    code = main(argv, environ=environ or {}, invoker=invoker, out=out.append, err=err.append)
    return code, out, err, sent


def test_global_options_are_accepted_after_the_command():
    code, _out, _, sent = _main({"status": "ok", "runs": []}, ["status", "--function-name", "fn", "--cluster", "c1"])
    assert code == 0
    assert sent == [{"action": "status", "cluster": "c1", "limit": 5}]


def test_an_option_given_before_the_command_is_not_reset_by_the_command():
    _, _, _, sent = _main({"status": "ok"}, ["--cluster", "before", "--function-name", "fn", "cancel"])
    assert sent[0]["cluster"] == "before"


def test_cluster_option_wins_over_the_environment():
    _, _, _, sent = _main(
        {"status": "ok"}, ["status", "--cluster", "flag"], {"CLUSTER_NAME": "env", "REFRESHER_FUNCTION_NAME": "fn"}
    )
    assert sent[0]["cluster"] == "flag"


def test_function_name_from_the_environment():
    code, _, err, sent = _main({"status": "ok"}, ["status"], {"CLUSTER_NAME": "c1", "REFRESHER_FUNCTION_NAME": "fn"})
    assert code == 0 and not err and sent


def test_a_missing_target_is_a_usage_error_on_stderr():
    out: list[str] = []
    err: list[str] = []
    code = main(["status", "--cluster", "c1"], environ={}, out=out.append, err=err.append)
    assert code == 2
    assert out == []
    assert len(err) == 1 and "--function-name" in err[0] and "--local" in err[0]


def test_a_missing_cluster_is_one_line_on_stderr():
    code, out, err, sent = _main({}, ["status", "--function-name", "fn"])
    assert code == 2 and out == [] and sent == []
    assert err == ["node-manager: --cluster or CLUSTER_NAME is required"]


def test_an_invocation_failure_is_one_line_on_stderr_and_exit_1():
    def boom(payload):
        raise RuntimeError("fn failed: {'errorMessage': 'x'}")

    code, out, err, _ = _main(boom, ["status", "--function-name", "fn", "--cluster", "c1"])
    assert code == 1 and out == []
    assert len(err) == 1 and "RuntimeError" in err[0]


def test_help_lists_the_variables_it_reads(capsys):
    assert main(["--help"], environ={}) == 0
    text = capsys.readouterr().out
    for var in ("CLUSTER_NAME", "REFRESHER_FUNCTION_NAME", "AWS_ENDPOINT_URL", "TABLE_NAME", "QUEUE_URL"):
        assert var in text
    assert main(["refresh", "--help"], environ={}) == 0
    assert "CLUSTER_NAME" in capsys.readouterr().out


def test_a_bad_option_is_exit_2():
    assert main(["status", "--no-such-option"], environ={}) == 2


RUN = {"run_id": "r1", "status": "running", "steps": {"pending": 2}}


def test_a_refresh_without_wait_says_what_it_started():
    code, out, _, _ = _main(
        {"status": "started", "run": RUN}, ["refresh", "--all", "--function-name", "fn", "--cluster", "c"]
    )
    assert code == 0
    assert out[-1].startswith("started run r1") and "node-manager status" in out[-1]


def test_a_followed_refresh_prints_each_run_line_once():
    answers = iter(
        [
            {"status": "started", "run": RUN},
            {"status": "ok", "runs": [RUN]},  # unchanged: not printed again
            {"status": "ok", "runs": [{**RUN, "status": "succeeded", "steps": {"done": 2}}]},
        ]
    )
    code, out, _, sent = _main(
        lambda payload: next(answers), ["refresh", "--all", "--wait", "30", "--function-name", "fn", "--cluster", "c"]
    )
    assert code == 0
    text = "\n".join(out)
    assert text.count("run r1: running (pending 2)") == 1
    assert text.count("run r1: succeeded (done 2)") == 1
    assert [p["action"] for p in sent] == ["refresh", "status", "status"]


def test_output_json_is_the_raw_response():
    import json

    code, out, _, _ = _main(
        {"status": "ok", "runs": []}, ["status", "--output", "json", "--function-name", "f", "--cluster", "c"]
    )
    assert code == 0 and json.loads("\n".join(out)) == {"status": "ok", "runs": []}


def test_a_long_wait_says_it_is_still_waiting_on_stderr(monkeypatch):
    from cli.main import follow

    clock = iter(range(0, 1000, 5))  # each reading of the clock is 5 s later
    monkeypatch.setattr("cli.main.time.monotonic", lambda: next(clock))
    monkeypatch.setattr("cli.main.time.sleep", lambda s: None)
    out: list[str] = []
    progress: list[str] = []
    answers = iter([{"runs": [RUN]}] * 6 + [{"runs": [{**RUN, "status": "succeeded"}]}])
    follow(lambda p: next(answers), "c", "r1", 600, False, out.append, seen="", progress=progress.append)
    assert out == ["run r1: running (pending 2)", "run r1: succeeded (pending 2)"]
    assert progress and all(line.startswith("... run r1 still running after") for line in progress)


def _record() -> dict:
    from tests.unit.charts.decided_run import worker_run_through_the_decider

    return worker_run_through_the_decider().model_dump(mode="json")


def test_status_draws_the_run_it_names_into_a_chart(tmp_path):
    record = _record()
    answer = {"status": "ok", "runs": [{"run_id": "r1", "status": "succeeded"}], "run_record": record}
    path = tmp_path / "r1.svg"
    code, out, err, sent = _main(
        answer, ["status", "--run", "r1", "--chart", str(path), "--function-name", "f", "--cluster", "c"]
    )
    assert code == 0 and not err
    assert sent == [{"action": "status", "cluster": "c", "limit": 5, "run_id": "r1"}]
    assert out[-1] == f"chart: {path} (2 instance rows, 1 groups)"
    assert path.stat().st_size > 0 and "span|i-00000000000000001|drain|1" in path.read_text()


def test_status_without_a_run_draws_the_newest(tmp_path):
    record = _record()

    def answer(payload):
        if payload.get("run_id"):
            return {"status": "ok", "runs": [{"run_id": "r1", "status": "succeeded"}], "run_record": record}
        return {"status": "ok", "runs": [{"run_id": "r1", "status": "succeeded"}]}

    path = tmp_path / "newest.png"
    code, _, err, sent = _main(answer, ["status", "--chart", str(path), "--function-name", "f", "--cluster", "c"])
    assert code == 0 and not err and [p.get("run_id") for p in sent] == [None, "r1"]
    assert path.stat().st_size > 0


def test_a_chart_without_matplotlib_is_one_line_naming_the_extra_and_exit_2(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    path = tmp_path / "r1.svg"
    code, out, err, sent = _main({}, ["status", "--chart", str(path), "--function-name", "f", "--cluster", "c"])
    assert code == 2 and out == [] and sent == [] and not path.exists()
    assert len(err) == 1 and "aws-node-manager[charts]" in err[0]


def test_a_chart_of_an_unknown_kind_is_a_usage_error(tmp_path):
    code, _, err, sent = _main(
        {}, ["status", "--chart", str(tmp_path / "x.gif"), "--function-name", "f", "--cluster", "c"]
    )
    assert code == 2 and sent == [] and ".svg" in err[0]


def test_a_rejected_request_says_each_problem_once():
    # the refresher's own request validation, answered as lambdas.common.prologue.rejected answers it
    from core.exceptions import InvalidRequestError
    from lambdas.events.request import parse_request

    def refresher(payload):
        try:
            parse_request(payload)
        except InvalidRequestError as err:
            return {"status": "rejected", "reason": err.reason, "error": str(err), "errors": err.errors}
        raise AssertionError("the request validated")

    lines: list[str] = []
    argv = ["--function-name", "fn", "--cluster", "c", "refresh", "--max-age", "two weeks"]
    assert main(argv, environ={}, invoker=refresher, out=lines.append) == 1
    assert "\n".join(lines).count("not a duration") == 1, lines


def test_aws_region_names_the_sdks_region(monkeypatch):
    import boto3

    import cli.main

    monkeypatch.setenv("AWS_DEFAULT_REGION", "unset-by-this-test")
    monkeypatch.delenv("AWS_DEFAULT_REGION")  # restored afterwards by monkeypatch
    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    cli.main.default_region_from_aws_region()
    assert boto3.session.Session().region_name == "eu-west-3"
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")  # the SDK's own variable wins when both are set
    cli.main.default_region_from_aws_region()
    assert boto3.session.Session().region_name == "us-west-2"
