"""local up's printed environment: shell lines a user can eval."""

from __future__ import annotations

import shlex

import pytest

from cli.args import parser
from cli.local import exports


def test_exports_are_shell_quoted_and_only_the_shown_variables():
    lines = exports({"AWS_ENDPOINT_URL": "http://127.0.0.1:5000", "KUBECONFIG": "/tmp/a b/kc", "PATH": "/bin"})
    assert lines == ["export AWS_ENDPOINT_URL=http://127.0.0.1:5000", "export KUBECONFIG='/tmp/a b/kc'"]
    assert shlex.split(lines[1]) == ["export", "KUBECONFIG=/tmp/a b/kc"]


@pytest.mark.parametrize("value", ["0", "-3"])
def test_local_up_refuses_a_number_of_workers_below_one(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parser().parse_args(["local", "up", "--nodes-per-az", value])
    assert exited.value.code == 2
    assert "give a number of workers of 1 or more" in capsys.readouterr().err


def test_local_up_takes_a_positive_number_of_workers() -> None:
    assert parser().parse_args(["local", "up", "--nodes-per-az", "4"]).nodes_per_az == 4
