"""The local bundler on its own: what it takes from requirements.txt, what it copies, and that it is repeatable.

These run the real pip for the Lambda's platform (served from the cache after the first run).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from infra.bundling import (
    LAMBDA_RUNTIME_PACKAGES,
    LAMBDA_TASK_ROOT,
    PIP_PLATFORMS,
    PROJECT_ROOT,
    PYTHON_VERSION,
    BundlingError,
    DependencyCache,
    LocalPythonBundler,
    compile_bytecode,
    lambda_python,
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
    """A project tree with the real requirements.txt, core/ and adapters/, plus tests and bytecode to leave out."""
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
    for package, line in zip(LAMBDA_RUNTIME_PACKAGES, lines, strict=True):
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
        DependencyCache.key(reqs, PIP_PLATFORMS[Architecture.ARM64], bytecode=True),
    }
    assert len(keys) == 5
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
    own = [f for f in files if f.startswith(("core/", "adapters/", "lambdas/"))]
    assert [f for f in own if "/test_" in f or "/tests/" in f or f.endswith("conftest.py")] == []
    # Bytecode for the Lambda's Python only, next to every module, ours and the dependencies'.
    tag = "cpython-" + PYTHON_VERSION.replace(".", "")
    pycs = {f for f in files if f.endswith(".pyc")}
    assert pycs and all(f.endswith(f".{tag}.pyc") and f.rsplit("/", 2)[-2] == "__pycache__" for f in pycs)
    for source in (
        f for f in files if f.endswith(".py") and f.startswith(("core/", "adapters/", "lambdas/", "pydantic/"))
    ):
        folder, name = source.rsplit("/", 1)
        assert f"{folder}/__pycache__/{name[:-3]}.{tag}.pyc" in pycs, source
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


@pytest.fixture(scope="module")
def python312() -> str:
    python = lambda_python()
    assert python is not None, "this machine kind has a CPython 3.12 (pyenv); set LAMBDA_PYTHON elsewhere"
    return python


def test_bytecode_is_hash_based_unchecked_and_names_the_lambda_task_root(python312: str, tmp_path: Path) -> None:
    package = tmp_path / "core"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "model.py").write_text("VALUE = frozenset({'a', 'b', 'c'})\n")
    compile_bytecode(package, python312, ddir=f"{LAMBDA_TASK_ROOT}/core")
    pyc = (package / "__pycache__" / "model.cpython-312.pyc").read_bytes()
    flags = int.from_bytes(pyc[4:8], "little")
    assert flags == 0b01  # PEP 552: hash-based, check_source off
    probe = "import marshal, sys; code = marshal.loads(open(sys.argv[1], 'rb').read()[16:]); print(code.co_filename)"
    out = subprocess.run(
        [python312, "-c", probe, str(package / "__pycache__" / "model.cpython-312.pyc")],
        check=True,
        capture_output=True,
        text=True,
    )
    assert out.stdout.strip() == f"{LAMBDA_TASK_ROOT}/core/model.py"
    first = pyc
    compile_bytecode(package, python312, ddir=f"{LAMBDA_TASK_ROOT}/core")
    assert (package / "__pycache__" / "model.cpython-312.pyc").read_bytes() == first


def test_the_lambdas_python_imports_the_asset_from_its_bytecode_without_reading_the_sources(
    python312: str, tmp_path: Path
) -> None:
    """Unchecked-hash pycs are taken as they are: with every source of core/ broken, core still imports."""
    asset = tmp_path / "asset"
    asset.mkdir()
    LocalPythonBundler(Architecture.X86_64).bundle(asset)
    for source in (asset / "core").rglob("*.py"):
        source.write_text("raise RuntimeError('the source was compiled at import')\n")
    probe = "import core.model, core.settings, pydantic, aws_lambda_powertools; print('ok')"
    out = subprocess.run(
        [python312, "-I", "-B", "-c", f"import sys; sys.path.insert(0, {str(asset)!r}); {probe}"],
        capture_output=True,
        text=True,
    )
    assert (out.returncode, out.stdout.strip()) == (0, "ok"), out.stderr
