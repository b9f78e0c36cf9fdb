"""The local bundler on its own: what it takes from requirements.txt, what it copies, and that it is repeatable.

These run the real pip for the Lambda's platform (served from the cache after the first run).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from infra.bundling import (
    LAMBDA_RUNTIME_PACKAGES,
    PIP_PLATFORMS,
    PROJECT_ROOT,
    BundlingError,
    DependencyCache,
    LocalPythonBundler,
    runtime_requirements,
)
from infra.config import Architecture

from .conftest import ELF_MACHINES, elf_machine


def tree_digest(root: Path) -> list[tuple[str, str]]:
    return sorted(
        (str(path.relative_to(root)), hashlib.sha256(path.read_bytes()).hexdigest())
        for path in root.rglob("*")
        if path.is_file()
    )


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project tree with the real requirements.txt, core/ and adapters/ plus tests and bytecode that must be left out."""
    root = tmp_path_factory.mktemp("project")
    shutil.copyfile(PROJECT_ROOT / "requirements.txt", root / "requirements.txt")
    for package in ("core", "adapters"):
        shutil.copytree(PROJECT_ROOT / package, root / package, ignore=shutil.ignore_patterns("__pycache__"))
    handler = root / "lambdas" / "interruption"
    handler.mkdir(parents=True)
    (root / "lambdas" / "__init__.py").write_text("")
    (handler / "__init__.py").write_text("")
    (handler / "handler.py").write_text("def lambda_handler(event, context):\n    return None\n")
    (handler / "test_handler.py").write_text("def test_x():\n    pass\n")
    (handler / "conftest.py").write_text("")
    (handler / "__pycache__").mkdir()
    (handler / "__pycache__" / "handler.cpython-311.pyc").write_bytes(b"\0")
    (root / "lambdas" / "tests").mkdir()
    (root / "lambdas" / "tests" / "test_more.py").write_text("")
    (root / "tests").mkdir()  # the project's own tests folder is not a source package
    (root / "tests" / "test_top.py").write_text("")
    return root


def test_runtime_requirements_are_the_pinned_lines_of_requirements_txt() -> None:
    lines = runtime_requirements(PROJECT_ROOT / "requirements.txt")
    file_lines = {line.strip() for line in (PROJECT_ROOT / "requirements.txt").read_text().splitlines()}
    assert len(lines) == len(LAMBDA_RUNTIME_PACKAGES)
    for package, line in zip(LAMBDA_RUNTIME_PACKAGES, lines):
        assert line in file_lines
        assert line.startswith(package) and "==" in line
    assert not any(line.startswith(("boto3", "botocore", "kubernetes")) for line in lines)


def test_a_runtime_package_missing_from_requirements_is_an_error(tmp_path: Path) -> None:
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("# only boto3\nboto3==1.44.8\npydantic==2.14.4  # pinned\n")
    with pytest.raises(BundlingError, match="aws-lambda-powertools"):
        runtime_requirements(requirements)


def test_cache_key_depends_on_requirements_and_platform() -> None:
    reqs = ["pydantic==2.14.4"]
    keys = {
        DependencyCache.key(reqs, PIP_PLATFORMS[Architecture.ARM64]),
        DependencyCache.key(reqs, PIP_PLATFORMS[Architecture.X86_64]),
        DependencyCache.key(["pydantic==2.14.3"], PIP_PLATFORMS[Architecture.ARM64]),
        DependencyCache.key(reqs, PIP_PLATFORMS[Architecture.ARM64], python_version="3.13"),
    }
    assert len(keys) == 4
    assert DependencyCache.key(reqs, "manylinux2014_aarch64") == DependencyCache.key(
        list(reqs), "manylinux2014_aarch64"
    )


@pytest.mark.parametrize("architecture", list(Architecture))
def test_bundle_is_repeatable_and_holds_only_what_the_lambda_needs(
    project: Path, tmp_path: Path, architecture: Architecture
) -> None:
    bundler = LocalPythonBundler(architecture, project_root=project)
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    assert bundler.try_bundle(str(first), image=None) is True
    bundler.bundle(second)

    assert tree_digest(first) == tree_digest(second)
    files = {path for path, _ in tree_digest(first)}
    assert "lambdas/interruption/handler.py" in files
    assert {f"core/{p.name}" for p in (project / "core").glob("*.py")} <= files
    assert {str(p.relative_to(project)) for p in (project / "adapters").rglob("*.py")} <= files
    assert not any(f.startswith("tests/") for f in files)
    assert not any("__pycache__" in f or f.endswith(".pyc") for f in files)
    own = [f for f in files if f.startswith(("core/", "adapters/", "lambdas/"))]
    assert [f for f in own if "/test_" in f or "/tests/" in f or f.endswith("conftest.py")] == []
    shared_objects = [first / f for f in files if f.endswith(".so")]
    assert shared_objects
    assert {elf_machine(so) for so in shared_objects} == {ELF_MACHINES[architecture.value]}


def test_cache_hit_does_not_run_pip(project: Path, tmp_path: Path) -> None:
    cache = DependencyCache()
    requirements = runtime_requirements(project / "requirements.txt")
    warm = cache.install(requirements, PIP_PLATFORMS[Architecture.ARM64])
    broken_pip = DependencyCache(root=cache.root, pip=("false",))
    assert broken_pip.install(requirements, PIP_PLATFORMS[Architecture.ARM64]) == warm


def test_pip_failure_is_reported_and_leaves_no_cache_entry(tmp_path: Path) -> None:
    cache = DependencyCache(root=tmp_path / "cache")
    with pytest.raises(BundlingError, match="pip install for manylinux2014_aarch64 failed"):
        cache.install(["this-distribution-does-not-exist-node-manager==0.0.0"], "manylinux2014_aarch64")
    assert os.listdir(tmp_path / "cache") == []
