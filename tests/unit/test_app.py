"""``python app.py`` (``make synth``) says which stacks it synthesized and where; under the CDK CLI it stays quiet
(the CLI reports the assembly itself)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

import app


class FakeApp:
    def __init__(self, directory: str) -> None:
        self.directory = directory

    def synth(self) -> Any:
        stacks = [SimpleNamespace(stack_name="NodeManager-a-k8s-local"), SimpleNamespace(stack_name="NodeManager-b")]
        return SimpleNamespace(stacks=stacks, directory=self.directory)


@pytest.mark.parametrize("under_cdk_cli", [False, True])
def test_synth_names_its_stacks_and_folder_when_run_by_hand(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Any, under_cdk_cli: bool
) -> None:
    import infra.application

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(infra.application, "build_app", lambda: FakeApp(str(tmp_path / "cdk.out")))
    if under_cdk_cli:
        monkeypatch.setenv("CDK_OUTDIR", str(tmp_path / "cdk.out"))
    else:
        monkeypatch.delenv("CDK_OUTDIR", raising=False)

    assert app.main() == 0

    err = capsys.readouterr().err  # after whatever jsii printed when aws-cdk-lib was first imported
    if under_cdk_cli:
        assert "synthesized" not in err
    else:
        assert (
            err.splitlines(keepends=True)[-1]
            == "synthesized NodeManager-a-k8s-local, NodeManager-b into cdk.out/ (templates *.template.json)\n"
        )


@pytest.mark.parametrize(
    ("entry", "key"),
    [
        ({"spot_deadline_seconds": "two minutes", "agent_trust_account": True}, "clusters[0].spot_deadline_seconds"),
        ({"spot_dedline_seconds": 120, "agent_trust_account": True}, "clusters[0].spot_dedline_seconds"),
        ({}, "clusters[0]"),  # no trust for the agent's role
    ],
)
def test_a_bad_setting_is_one_line_naming_its_key_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], entry: dict[str, Any], key: str
) -> None:
    import infra.application

    context = {"clusters": [{"name": "dev.k8s.local", **entry}]}  # ("cluster" would name the world's fixture)
    real_build_app = infra.application.build_app
    monkeypatch.setattr(infra.application, "build_app", lambda: real_build_app(context, outdir="unused"))

    assert app.main() == 2

    err = capsys.readouterr().err
    last = err.splitlines()[-1]  # after whatever jsii printed when aws-cdk-lib was first imported
    assert last.startswith(f"cdk.json: setting {key}: ") and "Traceback" not in err
