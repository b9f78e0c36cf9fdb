"""scripts/bootstrap.sh refuses a Python older than 3.11 in one line, before it creates or installs anything, and
accepts 3.11 and newer; ``--venv-only`` stops after the virtualenv (what ``make synth`` and ``make lint`` need).

The script runs from a copy of the repository's layout in a temp folder (it works relative to its own location), so
no test touches the repository's ``.venv``; the interpreters are small fakes printing a version, or the real one."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
REQUIREMENTS = ("requirements.txt", "requirements-dev.txt", "requirements-lint.txt")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A folder laid out like the repository, holding only what bootstrap.sh reads before its first step."""
    (tmp_path / "scripts").mkdir()
    shutil.copy2(ROOT / "scripts" / "bootstrap.sh", tmp_path / "scripts" / "bootstrap.sh")
    shutil.copytree(ROOT / "scripts" / "lib", tmp_path / "scripts" / "lib")
    for name in REQUIREMENTS:
        shutil.copy2(ROOT / name, tmp_path / name)
    return tmp_path


def fake_python(path: Path, version: str) -> Path:
    """An executable that prints ``version`` whatever it is asked (as ``python -c 'print(version)'`` would)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho {version}\n")
    path.chmod(0o755)
    return path


def ready_venv(repo: Path, python: Path | None = None, version: str = "") -> None:
    """A .venv whose requirements stamp matches, so the script has nothing to install."""
    interpreter = repo / ".venv" / "bin" / "python"
    if python is not None:
        interpreter.parent.mkdir(parents=True)
        interpreter.symlink_to(python)
    else:
        fake_python(interpreter, version)
    digest = hashlib.sha256(b"".join((repo / name).read_bytes() for name in REQUIREMENTS)).hexdigest()
    (repo / ".venv" / ".requirements.sha256").write_text(digest + "\n")


def bootstrap(repo: Path, *args: str, python: str | None = None, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHON", "KUBEBUILDER_ASSETS", "PROGRESS_EVERY")}
    env.update(extra)
    if python is not None:
        env["PYTHON"] = python
    return subprocess.run(
        ["bash", str(repo / "scripts" / "bootstrap.sh"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("version", ["3.10", "3.9", "2.7"])
def test_an_old_python_is_refused_in_one_line_before_anything_is_created(repo: Path, version: str) -> None:
    old = fake_python(repo / "old" / "python3", version)
    done = bootstrap(repo, python=str(old))
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"[bootstrap] error: Python 3.11 or newer is needed, '{old}' is {version}; "
        "run again with PYTHON=/path/to/python3.11 (or newer)"
    ]
    assert not (repo / ".venv").exists()


def test_a_venv_made_by_an_old_python_is_refused_too(repo: Path) -> None:
    ready_venv(repo, version="3.10")
    done = bootstrap(repo, "--venv-only", python=sys.executable)
    assert done.returncode == 1
    assert len(done.stderr.splitlines()) == 1
    assert "is 3.10; remove .venv and run again with PYTHON=" in done.stderr


def test_a_missing_interpreter_is_named(repo: Path) -> None:
    done = bootstrap(repo, python=str(repo / "no-such-python"))
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"[bootstrap] error: no Python at '{repo / 'no-such-python'}'; run again with PYTHON=/path/to/python3.11 "
        "(or newer)"
    ]


@pytest.mark.parametrize("version", ["3.11", "3.12", "3.13", "4.0"])
def test_newer_pythons_are_accepted(repo: Path, version: str) -> None:
    ready_venv(repo, version=version)
    done = bootstrap(repo, "--venv-only")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == ["[bootstrap] .venv is up to date"]


def test_the_real_interpreter_passes_and_venv_only_stops_before_the_local_world(repo: Path) -> None:
    """--venv-only ends after the virtualenv: no kubectl, no kube assets (a missing install script would fail)."""
    assert sys.version_info >= (3, 11)
    ready_venv(repo, python=Path(sys.executable))
    done = bootstrap(repo, "--venv-only", python="/nonexistent/python3")  # .venv's interpreter is the one checked
    assert done.returncode == 0, done.stderr
    assert "kube assets" not in done.stderr
    if shutil.which("kubectl") is None:
        return  # the whole bootstrap would apt-get kubectl: not in a test
    # Without --venv-only the script goes on to the local world (here: the install script is not in the copy).
    full = bootstrap(repo)
    assert full.returncode != 0 and "install-kube-assets.sh" in full.stderr, full.stderr


def stale_venv(repo: Path, pip_exit: int) -> None:
    """A .venv of Python "3.12" whose requirements stamp is stale; its pip takes a second, then exits ``pip_exit``;
    the import check and ruff pass."""
    bin_dir = repo / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").write_text(
        f'#!/bin/sh\nif [ "$1" = -m ]; then sleep 1; echo "pip ran"; exit {pip_exit}; fi\necho 3.12\n'
    )
    (bin_dir / "ruff").write_text("#!/bin/sh\necho ruff 0.0.0\n")
    for tool in ("python", "ruff"):
        (bin_dir / tool).chmod(0o755)


def test_a_quiet_install_says_it_still_runs_and_ends_with_it(repo: Path) -> None:
    stale_venv(repo, pip_exit=0)
    started = time.monotonic()
    done = bootstrap(repo, "--venv-only", PROGRESS_EVERY="0.3")
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert "[bootstrap]   ... still installing requirements (" in done.stderr
    assert done.stderr.splitlines()[-1].startswith("[bootstrap] requirements installed in ")
    assert (repo / ".venv" / ".requirements.sha256").exists()
    assert took < 5, f"the progress ticker kept the output open: {took:.1f} s"


def test_a_failed_pip_install_fails_the_bootstrap(repo: Path) -> None:
    """The filter that drops pip's harmless warning must not hide pip's exit status."""
    stale_venv(repo, pip_exit=1)
    done = bootstrap(repo, "--venv-only", PROGRESS_EVERY="30")
    assert done.returncode == 1
    assert done.stderr.splitlines()[-2:] == ["pip ran", "[bootstrap] error: pip install failed (output above)"]
    assert not (repo / ".venv" / ".requirements.sha256").exists()


def test_an_unknown_option_is_refused(repo: Path) -> None:
    done = bootstrap(repo, "--venv")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "[bootstrap] error: unknown option --venv (usage: scripts/bootstrap.sh [--venv-only])"
    ]


def distro_python(path: Path, version_ok: bool, makes_venv: bool) -> Path:
    """A fake distribution interpreter: its version check (``-c``) passes or not; ``-m venv DIR`` makes a venv whose
    python and ruff pass every later step (pip, the import check), or leaves a half-made one and fails."""
    venv_python = '#!/bin/sh\nif [ "$1" = -m ]; then echo "pip ran"; fi\necho 3.11\n'
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = -c ]; then exit {0 if version_ok else 1}; fi\n'
        'if [ "$1" = --version ]; then echo "Python 3.11.2"; exit 0; fi\n'
        'if [ "$1" = -m ] && [ "$2" = venv ]; then\n'
        '  mkdir -p "$3/bin"\n'
        f"  {'' if makes_venv else 'exit 1'}\n"
        f"  printf '%s' '{venv_python}' > \"$3/bin/python\"\n"
        "  printf '#!/bin/sh\\necho ruff 0.0.0\\n' > \"$3/bin/ruff\"\n"
        '  chmod +x "$3/bin/python" "$3/bin/ruff"; exit 0\n'
        "fi\n"
        "exit 2\n"
    )
    path.chmod(0o755)
    return path


def old_python3_on_path(repo: Path) -> str:
    """A PATH whose ``python3`` is a fake 3.10 (so a fallback to it is refused at once, nothing installed)."""
    fake_python(repo / "path" / "python3", "3.10")
    return f"{repo / 'path'}:{os.environ['PATH']}"


def test_without_python_set_the_distributions_interpreter_makes_the_venv(repo: Path) -> None:
    distro = distro_python(repo / "distro" / "python3", version_ok=True, makes_venv=True)
    done = bootstrap(
        repo, "--venv-only", BOOTSTRAP_DISTRO_PYTHON=str(distro), PATH=old_python3_on_path(repo), PROGRESS_EVERY="30"
    )
    assert done.returncode == 0, done.stderr
    assert f"[bootstrap] created .venv with the distribution's Python 3.11.2 ({distro}; PYTHON= chooses another)" in (
        done.stderr.splitlines()
    )
    assert (repo / ".venv" / ".requirements.sha256").exists()


@pytest.mark.parametrize(("version_ok", "makes_venv"), [(False, True), (True, False)])
def test_a_distribution_interpreter_too_old_or_without_venv_falls_back_to_python3(
    repo: Path, version_ok: bool, makes_venv: bool
) -> None:
    distro = distro_python(repo / "distro" / "python3", version_ok=version_ok, makes_venv=makes_venv)
    done = bootstrap(repo, "--venv-only", BOOTSTRAP_DISTRO_PYTHON=str(distro), PATH=old_python3_on_path(repo))
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "[bootstrap] error: Python 3.11 or newer is needed, 'python3' is 3.10; "
        "run again with PYTHON=/path/to/python3.11 (or newer)"
    ]
    assert not (repo / ".venv").exists()  # a half-made venv is removed before the fallback


def test_python_set_wins_over_the_distributions_interpreter(repo: Path) -> None:
    distro = distro_python(repo / "distro" / "python3", version_ok=True, makes_venv=True)
    old = fake_python(repo / "old" / "python3", "3.10")
    done = bootstrap(repo, "--venv-only", python=str(old), BOOTSTRAP_DISTRO_PYTHON=str(distro))
    assert done.returncode == 1
    assert "is 3.10" in done.stderr and not (repo / ".venv").exists()
