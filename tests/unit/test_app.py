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

    app.main()

    err = capsys.readouterr().err  # after whatever jsii printed when aws-cdk-lib was first imported
    if under_cdk_cli:
        assert "synthesized" not in err
    else:
        assert (
            err.splitlines(keepends=True)[-1]
            == "synthesized NodeManager-a-k8s-local, NodeManager-b into cdk.out/ (templates *.template.json)\n"
        )
