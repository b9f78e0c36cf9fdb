"""Finding the kube assets, the processes' command lines, and the clean-up of folders left by killed runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from localworld.kube_processes import (
    OWNER_FILE,
    KubeAssetsMissingError,
    apiserver_argv,
    etcd_argv,
    find_assets,
    remove_stale_dirs,
    terminate,
)


def test_find_assets_wants_both_binaries_executable(tmp_path: Path) -> None:
    with pytest.raises(KubeAssetsMissingError, match="install-kube-assets"):
        find_assets(tmp_path)
    for name in ("etcd", "kube-apiserver"):
        (tmp_path / name).write_text("#!/bin/sh\n")
        (tmp_path / name).chmod(0o755)
    assert find_assets(tmp_path) == tmp_path


def test_command_lines_bind_to_localhost_and_use_the_given_files(tmp_path: Path) -> None:
    etcd = etcd_argv(tmp_path, tmp_path / "data", 2379, 2380)
    assert etcd[0] == str(tmp_path / "etcd") and "--listen-client-urls=http://127.0.0.1:2379" in etcd
    api = apiserver_argv(tmp_path, "http://127.0.0.1:2379", 6443, tmp_path / "pki", tmp_path / "tokens.csv")
    assert "--secure-port=6443" in api and "--authorization-mode=RBAC" in api
    assert f"--token-auth-file={tmp_path / 'tokens.csv'}" in api


def test_stale_folders_of_dead_owners_are_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tempfile.gettempdir", lambda: str(tmp_path))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale, live, foreign = (tmp_path / f"localworld-kube-{n}" for n in ("stale", "live", "foreign"))
    for folder in (stale, live, foreign):
        folder.mkdir()
    (stale / OWNER_FILE).write_text(str(dead.pid))
    (live / OWNER_FILE).write_text(str(os.getpid()))
    assert stale in remove_stale_dirs()
    assert not stale.exists() and live.exists() and foreign.exists()


def test_terminate_stops_a_running_process_group() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    terminate(proc, grace=5)
    assert proc.returncode is not None
    terminate(proc)  # already reaped: nothing to do
    terminate(None)
