"""The Lambda asset, bundled on this machine without Docker, for the Lambda's own platform.

The asset holds the project's ``core/``, ``adapters/`` and ``lambdas/`` packages (no tests) and the Lambda's runtime
dependencies installed by pip *for the Lambda's platform* (manylinux2014 aarch64 or x86_64, CPython 3.12), whatever this
machine is.
boto3 is not bundled: the Lambda Python runtime provides it
(https://docs.aws.amazon.com/lambda/latest/dg/lambda-python.html, "Runtime-included SDK versions").

The dependency versions come from ``requirements.txt`` (the lines for ``LAMBDA_RUNTIME_PACKAGES``; nothing is
re-pinned here). The pip result is cached under ``~/.cache/aws-node-manager/lambda-deps/<key>``, where the key hashes
those requirement lines and the target platform, so repeated synths (tests) copy instead of downloading.

Bytecode: a Lambda's code folder is read-only, so without bytecode in the asset every cold start compiles core/,
lambdas/, Powertools and pydantic from source (about 0.2 s). The asset therefore ships ``__pycache__/*.cpython-312.pyc``
compiled by a CPython 3.12 on this machine (``lambda_python``: ``$LAMBDA_PYTHON``, ``python3.12`` on the PATH, or a
pyenv 3.12) in PEP 552 *unchecked-hash* mode: the importer takes the pyc without stat-ing or hashing the source (the
asset never changes under it), and the file holds no timestamp. Tracebacks name ``/var/task/...`` (the Lambda's code
folder). Without a 3.12 interpreter the asset is built from source only, with a warning (correct, slower to start).

Determinism: the same sources and the same cached dependencies give a byte-identical directory (pip runs with
``--no-compile`` so this interpreter's bytecode never lands in the asset; bytecode is hash-based and compiled with
``PYTHONHASHSEED=0``; files are copied in sorted order), and the asset's hash is computed from that output
(``AssetHashType.OUTPUT``), so the asset hash changes exactly when the deployed code does.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_

from infra.config import Architecture

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PYTHON_VERSION = "3.12"
PYTHON_RUNTIME = lambda_.Runtime.PYTHON_3_12
# Packages of this project copied into the asset (import roots of the Lambda handlers).
SOURCE_PACKAGES = ("core", "adapters", "lambdas")
# Distributions the Lambdas need at run time beyond the runtime's own boto3 (names as in requirements.txt).
LAMBDA_RUNTIME_PACKAGES = ("aws-lambda-powertools", "pydantic")
# pip platform tag per Lambda architecture (manylinux2014 = glibc 2.17, older than Amazon Linux 2023's 2.34).
PIP_PLATFORMS = {
    Architecture.ARM64: "manylinux2014_aarch64",
    Architecture.X86_64: "manylinux2014_x86_64",
}
DEFAULT_CACHE_DIR = Path.home() / ".cache" / "aws-node-manager" / "lambda-deps"
# Where the Lambda runtime puts the function's code (the file names compiled into the bytecode, for tracebacks).
LAMBDA_TASK_ROOT = "/var/task"
# Bump when the layout of a cache entry changes, so stale entries are not reused.
_CACHE_FORMAT = "2"
_IGNORED_DIRS = frozenset({"__pycache__", "tests", "test", ".pytest_cache", ".mypy_cache"})
_IGNORED_FILE_RE = re.compile(r"(\.py[co]$|^test_.*\.py$|^.*_test\.py$|^conftest\.py$|^\.)")
_REQ_NAME_RE = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


class BundlingError(Exception):
    """The asset could not be built (a requirement missing from requirements.txt, pip failed)."""


def _normalize(name: str) -> str:
    # PEP 503 normalized project name
    return re.sub(r"[-_.]+", "-", name).lower()


def runtime_requirements(requirements_file: Path, packages: Iterable[str] = LAMBDA_RUNTIME_PACKAGES) -> list[str]:
    """The lines of ``requirements_file`` that pin ``packages`` (extras and markers kept as written).

    Returns:
        The requirement lines in ``packages`` order, e.g. ``["aws-lambda-powertools[parser]==3.37.0",
        "pydantic==2.14.4"]``.

    Raises:
        BundlingError: a package has no line in the file.
    """
    wanted = {_normalize(p): p for p in packages}
    found: dict[str, str] = {}
    for raw in requirements_file.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        match = _REQ_NAME_RE.match(line)
        if not line or line.startswith("-") or match is None:
            continue
        name = _normalize(match.group(1))
        if name in wanted:
            found[name] = line
    missing = [original for name, original in wanted.items() if name not in found]
    if missing:
        raise BundlingError(f"{requirements_file} has no requirement line for {', '.join(missing)}")
    return [found[_normalize(p)] for p in packages]


def _ignored(name: str, is_dir: bool) -> bool:
    return name in _IGNORED_DIRS if is_dir else bool(_IGNORED_FILE_RE.search(name))


def copy_sources(project_root: Path, packages: Sequence[str], output_dir: Path) -> None:
    """Copy the ``packages`` folders of ``project_root`` into ``output_dir``, without tests and bytecode.

    Folders that do not exist (yet) are skipped; symlinks are copied as the files they point to.
    """
    for package in packages:
        source = project_root / package
        if not source.is_dir():
            continue
        for directory, dirnames, filenames in os.walk(source):
            dirnames[:] = sorted(d for d in dirnames if not _ignored(d, is_dir=True))
            relative = Path(directory).relative_to(project_root)
            (output_dir / relative).mkdir(parents=True, exist_ok=True)
            for filename in sorted(filenames):
                if not _ignored(filename, is_dir=False):
                    shutil.copyfile(Path(directory) / filename, output_dir / relative / filename)


def lambda_python(version: str = PYTHON_VERSION) -> str | None:
    """A CPython ``version`` interpreter on this machine to compile the asset's bytecode with, or None.

    Tried in order: ``$LAMBDA_PYTHON``, ``python<version>`` on the PATH, ``~/.pyenv/versions/<version>.*`` (newest
    first); the first that runs and reports ``version`` wins (a pyenv shim that is not enabled does not).
    """
    candidates = [os.environ.get("LAMBDA_PYTHON", ""), shutil.which(f"python{version}") or ""]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates += sorted((str(p) for p in pyenv.glob(f"{version}.*/bin/python{version}")), reverse=True)
    probe = "import sys, platform; print('%d.%d' % sys.version_info[:2], platform.python_implementation())"
    for candidate in filter(None, candidates):
        try:
            out = subprocess.run([candidate, "-c", probe], capture_output=True, text=True, timeout=30, check=True)
        except (OSError, subprocess.SubprocessError):
            continue
        if out.stdout.split() == [version, "CPython"]:
            return candidate
    return None


def compile_bytecode(root: Path, python: str, timeout_seconds: float = 600.0, ddir: str = LAMBDA_TASK_ROOT) -> None:
    """Compile every ``.py`` under ``root`` with ``python`` into ``__pycache__`` (unchecked-hash pycs).

    File names in the bytecode are ``<ddir>/<path under root>`` (``root`` is deployed as ``ddir``).

    Raises:
        BundlingError: a file did not compile, or compileall ran past ``timeout_seconds``.
    """
    command = [
        python,
        "-m",
        "compileall",
        "-q",
        "-j",
        "0",
        "--invalidation-mode",
        "unchecked-hash",
        "-d",
        ddir,
        str(root),
    ]
    env = {**os.environ, "PYTHONHASHSEED": "0"}  # frozensets in constants are marshalled in hash order
    try:
        subprocess.run(command, check=True, capture_output=True, text=True, timeout=timeout_seconds, env=env)
    except subprocess.CalledProcessError as err:
        raise BundlingError(f"compiling {root} with {python} failed:\n{err.stdout}{err.stderr}") from err
    except subprocess.TimeoutExpired as err:
        raise BundlingError(f"compiling {root} ran past {timeout_seconds} s") from err


class DependencyCache:
    """pip installs of the Lambda's runtime dependencies, one folder per (requirements, platform).

    Parameters:
        root: cache folder (default ``~/.cache/aws-node-manager/lambda-deps``).
        pip: the pip command to run (default this interpreter's ``-m pip``).
        timeout_seconds: deadline for one pip run.
    """

    def __init__(
        self,
        root: Path = DEFAULT_CACHE_DIR,
        pip: Sequence[str] = (sys.executable, "-m", "pip"),
        timeout_seconds: float = 600.0,
    ) -> None:
        self.root = root
        self.pip = tuple(pip)
        self.timeout_seconds = timeout_seconds

    @staticmethod
    def key(
        requirements: Sequence[str], platform: str, python_version: str = PYTHON_VERSION, bytecode: bool = False
    ) -> str:
        """Cache key: sha256 over the requirement lines, the pip platform tag, the Python version and whether the
        entry holds bytecode."""
        digest = hashlib.sha256()
        for part in (_CACHE_FORMAT, platform, python_version, "cp", "pyc" if bytecode else "py", *requirements):
            digest.update(part.encode() + b"\0")
        return digest.hexdigest()[:32]

    def install(
        self,
        requirements: Sequence[str],
        platform: str,
        python_version: str = PYTHON_VERSION,
        compile_with: str | None = None,
    ) -> Path:
        """The folder holding ``requirements`` installed for ``platform``; runs pip only on a cache miss.

        ``compile_with``: a CPython ``python_version`` interpreter; the entry then also holds the bytecode it
        compiled (``compile_bytecode``).

        Raises:
            BundlingError: pip or the compilation failed or ran past ``timeout_seconds``.
        """
        target = self.root / self.key(requirements, platform, python_version, bytecode=compile_with is not None)
        if target.is_dir():
            return target
        self.root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=self.root))
        try:
            with tempfile.NamedTemporaryFile("w", suffix=".txt", dir=staging, delete=False) as reqs:
                reqs.write("\n".join(requirements) + "\n")
            command = [
                *self.pip,
                "install",
                "--quiet",
                "--no-input",
                "--disable-pip-version-check",
                "--no-compile",  # no .pyc of *this* interpreter in the asset
                "--target",
                str(staging / "site"),
                "--platform",
                platform,
                "--implementation",
                "cp",
                "--python-version",
                python_version,
                "--only-binary=:all:",
                "-r",
                reqs.name,
            ]
            try:
                subprocess.run(command, check=True, capture_output=True, text=True, timeout=self.timeout_seconds)
            except subprocess.CalledProcessError as err:
                raise BundlingError(f"pip install for {platform} failed:\n{err.stderr}") from err
            except subprocess.TimeoutExpired as err:
                raise BundlingError(f"pip install for {platform} ran past {self.timeout_seconds} s") from err
            shutil.rmtree(staging / "site" / "bin", ignore_errors=True)  # console scripts: not importable
            if compile_with is not None:
                compile_bytecode(staging / "site", compile_with, self.timeout_seconds)
            try:
                os.rename(staging / "site", target)
            except OSError:
                if not target.is_dir():  # another synth won the race: use its result
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return target


def copy_tree_sorted(source: Path, destination: Path) -> None:
    """Copy ``source`` into ``destination`` (merging), in sorted order, without metadata."""
    for directory, dirnames, filenames in os.walk(source):
        dirnames.sort()
        relative = Path(directory).relative_to(source)
        (destination / relative).mkdir(parents=True, exist_ok=True)
        for filename in sorted(filenames):
            shutil.copyfile(Path(directory) / filename, destination / relative / filename)


@jsii.implements(ILocalBundling)
class LocalPythonBundler:
    """Builds the Lambda asset in-process: dependencies for the Lambda's platform, then the project's packages.

    Parameters:
        architecture: the Lambda's architecture; picks the pip platform tag.
        project_root: folder holding ``requirements.txt`` and the ``SOURCE_PACKAGES``.
        cache: where pip results are kept.
        bytecode: ship bytecode for the Lambda's Python (when an interpreter is found, see ``lambda_python``).
    """

    def __init__(
        self,
        architecture: Architecture,
        project_root: Path = PROJECT_ROOT,
        cache: DependencyCache | None = None,
        bytecode: bool = True,
    ) -> None:
        self.architecture = architecture
        self.project_root = project_root
        self.cache = cache or DependencyCache()
        self.python = lambda_python() if bytecode else None
        if bytecode and self.python is None:
            warnings.warn(
                f"no CPython {PYTHON_VERSION} found (set LAMBDA_PYTHON): the Lambda asset ships no bytecode, so each "
                "cold start compiles it",
                stacklevel=2,
            )

    @property
    def platform(self) -> str:
        return PIP_PLATFORMS[self.architecture]

    def bundle(self, output_dir: Path) -> None:
        """Write the asset's files into ``output_dir`` (an empty folder).

        Raises:
            BundlingError: see ``runtime_requirements`` and ``DependencyCache.install``.
        """
        requirements = runtime_requirements(self.project_root / "requirements.txt")
        dependencies = self.cache.install(requirements, self.platform, compile_with=self.python)
        clashes = [p for p in SOURCE_PACKAGES if (dependencies / p).exists()]
        if clashes:
            raise BundlingError(f"a dependency installs top-level {clashes}, which would shadow the project's own")
        copy_tree_sorted(dependencies, output_dir)
        copy_sources(self.project_root, SOURCE_PACKAGES, output_dir)
        if self.python is not None:
            for package in SOURCE_PACKAGES:
                if (output_dir / package).is_dir():
                    compile_bytecode(output_dir / package, self.python, ddir=f"{LAMBDA_TASK_ROOT}/{package}")

    # ILocalBundling: CDK calls this with the folder to fill; True means "done, do not use Docker".
    def try_bundle(self, output_dir: str, *, image: DockerImage | None = None, **_options: Any) -> bool:
        self.bundle(Path(output_dir))
        return True


def lambda_code(
    architecture: Architecture, project_root: Path = PROJECT_ROOT, cache: DependencyCache | None = None
) -> lambda_.Code:
    """The asset for every Python Lambda of this project on ``architecture`` (share it between functions).

    Docker is never used: the ``image`` is a placeholder that CDK only needs when local bundling declines.
    """
    bundler = LocalPythonBundler(architecture, project_root, cache)
    return lambda_.Code.from_asset(
        str(project_root),
        asset_hash_type=AssetHashType.OUTPUT,
        bundling=BundlingOptions(image=DockerImage.from_registry("none"), local=bundler),
    )
