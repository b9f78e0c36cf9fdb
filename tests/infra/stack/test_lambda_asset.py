"""The interruption Lambda's code asset as synthesized: the handler and ``core``, native code and bytecode for the
Lambda's platform and Python, the pinned dependencies and nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest
from aws_cdk.assertions import Template

from infra.bundling import PROJECT_ROOT, runtime_requirements
from infra.interruption import HANDLER
from tests.infra.conftest import ELF_MACHINES, Synthesis, elf_machine
from tests.infra.stack.resources import STACK, function_id

pytestmark = pytest.mark.slow  # the package's one synth (tests/infra/stack/conftest.py): several seconds


@pytest.fixture(scope="module")
def asset(synth: Synthesis, template: Template) -> Path:
    return synth.function_asset_dir(STACK, function_id(template))


def test_asset_holds_the_handler_and_core(asset: Path) -> None:
    module = HANDLER.rsplit(".", 1)[0].replace(".", "/") + ".py"
    assert (asset / module).is_file(), f"{module} missing from the asset"
    for source in (PROJECT_ROOT / "core").glob("*.py"):
        assert (asset / "core" / source.name).read_bytes() == source.read_bytes()


def test_asset_native_code_is_for_the_lambdas_platform(asset: Path) -> None:
    (pydantic_core,) = asset.glob("pydantic_core/_pydantic_core*.so")
    assert pydantic_core.name == "_pydantic_core.cpython-312-aarch64-linux-gnu.so"
    shared_objects = list(asset.rglob("*.so"))
    assert {elf_machine(so) for so in shared_objects} == {ELF_MACHINES["arm64"]}
    for wheel in asset.glob("*.dist-info/WHEEL"):
        tags = [line.split(":", 1)[1].strip() for line in wheel.read_text().splitlines() if line.startswith("Tag:")]
        assert all(
            tag.startswith(("py3-none-any", "cp312-cp312-manylinux")) and tag.endswith(("any", "aarch64"))
            for tag in tags
        ), (wheel, tags)


def test_asset_has_bytecode_only_for_the_lambdas_python_and_no_tests(asset: Path) -> None:
    paths = [str(p.relative_to(asset)) for p in asset.rglob("*")]
    pycs = [p for p in paths if p.endswith(".pyc")]
    assert pycs, "the asset ships bytecode (infra.bundling: a CPython 3.12 is on this machine kind)"
    assert [p for p in pycs if not (p.endswith(".cpython-312.pyc") and Path(p).parent.name == "__pycache__")] == []
    assert [p for p in paths if "cpython-311" in p] == []
    assert not (asset / "tests").exists()
    assert [
        p
        for p in paths
        if p.startswith(("core/", "lambdas/"))
        and (Path(p).name.startswith("test_") or "/tests/" in p or Path(p).name == "conftest.py")
    ] == []


def test_asset_dependencies_are_the_pinned_ones_and_not_boto3(asset: Path) -> None:
    for line in runtime_requirements(PROJECT_ROOT / "requirements.txt"):
        name, version = line.split("==")
        distribution = name.split("[")[0].replace("-", "_")
        assert (asset / f"{distribution}-{version.strip()}.dist-info").is_dir(), line
    assert not (asset / "boto3").exists() and not (asset / "botocore").exists()
    assert not (asset / "kubernetes").exists()
