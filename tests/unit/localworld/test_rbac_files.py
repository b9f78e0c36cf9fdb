"""The agent's RBAC manifests reach an installed package, and their absence is an error, not an agent without RBAC."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, cast

import pytest

from localworld.rbac import RBAC_DIR, apply_agent_rbac
from localworld.rest import KubeRest

ROOT = Path(__file__).resolve().parents[3]


def test_pyproject_ships_every_file_of_agent_deploy() -> None:
    # `pip install .` installs only what [tool.setuptools.package-data] lists besides the .py files.
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["agent"]
    shipped = {path for pattern in patterns for path in (ROOT / "agent").glob(pattern) if path.is_file()}
    present = {path for path in (ROOT / "agent" / "deploy").rglob("*") if path.is_file()}
    assert present and shipped >= present, sorted(str(p.relative_to(ROOT)) for p in present - shipped)
    assert any(p.parent == RBAC_DIR for p in shipped)


def test_a_folder_without_manifests_is_an_error_before_any_request(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text("resources: []\n")  # the kustomize file alone is no manifest
    never_called = cast(KubeRest, cast(Any, object()))  # any request would raise AttributeError
    with pytest.raises(FileNotFoundError, match="no RBAC manifests"):
        apply_agent_rbac(never_called, tmp_path)
