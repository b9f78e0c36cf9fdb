"""local up's printed environment: shell lines a user can eval."""

from __future__ import annotations

import shlex

from cli.local import exports


def test_exports_are_shell_quoted_and_only_the_shown_variables():
    lines = exports({"AWS_ENDPOINT_URL": "http://127.0.0.1:5000", "KUBECONFIG": "/tmp/a b/kc", "PATH": "/bin"})
    assert lines == ["export AWS_ENDPOINT_URL=http://127.0.0.1:5000", "export KUBECONFIG='/tmp/a b/kc'"]
    assert shlex.split(lines[1]) == ["export", "KUBECONFIG=/tmp/a b/kc"]
