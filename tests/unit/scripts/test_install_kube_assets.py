"""scripts/install-kube-assets.sh on a machine where the assets are already built: it finds them, prints the versions
and the folder, and exits 0 every time (it once piped ``etcd --version`` into ``head -1`` under ``pipefail`` and
failed one run in five with exit 141 when etcd got SIGPIPE)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "install-kube-assets.sh"
CACHE = Path(os.environ.get("KUBE_ASSETS_DIR") or "~/.cache/aws-node-manager/kube-assets").expanduser()
RUNS = 50


def run_script(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)


def etcd_installed() -> bool:
    return shutil.which("etcd") is not None or os.access("/usr/bin/etcd", os.X_OK)


@pytest.mark.skipif(
    not (os.access(CACHE / "kube-apiserver", os.X_OK) and etcd_installed()),
    reason=f"no built kube assets in {CACHE} (and etcd installed): run scripts/install-kube-assets.sh once first; "
    "without them the script would apt-get and build kube-apiserver, which a test must not do",
)
def test_the_cached_assets_are_found_fifty_times_in_a_row() -> None:
    env = {**os.environ, "KUBE_ASSETS_DIR": str(CACHE)}
    for attempt in range(RUNS):
        done = run_script(env)
        assert done.returncode == 0, f"run {attempt + 1}/{RUNS}: exit {done.returncode}\n{done.stderr}"
        assert done.stdout.splitlines()[-1] == str(CACHE)
        assert "apt-get" not in done.stderr and "building" not in done.stderr, done.stderr


def test_a_chatty_etcd_does_not_fail_the_script(tmp_path: Path) -> None:
    """etcd writing far more than a pipe holds after its first line: a reader that stops early would kill it with
    SIGPIPE (exit 141) on every run, so this catches the pipe deterministically, with or without the real cache."""
    bin_dir, assets = tmp_path / "bin", tmp_path / "kube-assets"
    bin_dir.mkdir()
    assets.mkdir()
    (bin_dir / "etcd").write_text(
        '#!/bin/sh\necho "etcd Version: 3.4.23"\ni=0\nwhile [ $i -lt 20000 ]; do echo "Git SHA: padding line $i"; '
        "i=$((i+1)); done\n"
    )
    (assets / "kube-apiserver").write_text('#!/bin/sh\necho "Kubernetes v1.20.2"\n')
    for fake in (bin_dir / "etcd", assets / "kube-apiserver"):
        fake.chmod(0o755)
    env = {**os.environ, "KUBE_ASSETS_DIR": str(assets), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    for attempt in range(5):
        done = run_script(env)
        assert done.returncode == 0, f"run {attempt + 1}: exit {done.returncode}\n{done.stderr[-2000:]}"
        assert done.stdout.splitlines() == [str(assets)]
        assert done.stderr.splitlines() == ["Kubernetes v1.20.2", "etcd Version: 3.4.23"]
    assert (assets / "etcd").resolve() == (bin_dir / "etcd").resolve()


@pytest.mark.skipif(
    not Path("/etc/apt/sources.list.d/debian-src.sources").exists(),
    reason="the script would add a deb-src entry under /etc/apt first, which a test must not do",
)
def test_a_silent_build_says_it_still_runs(tmp_path: Path) -> None:
    """The Go build prints nothing for minutes: a line every PROGRESS_EVERY seconds says it still runs, and the ticker
    stops with the build (apt, the source download and make are stand-ins here)."""
    bin_dir, assets = tmp_path / "bin", tmp_path / "kube-assets"
    bin_dir.mkdir()
    fakes = {
        "sudo": '#!/bin/sh\nif [ "$1" = tee ]; then cat >/dev/null; exit 0; fi\nexec "$@"\n',
        "apt-get": '#!/bin/sh\nif [ "$1" = source ]; then mkdir -p kubernetes-1.20.2; fi\n',
        "make": "#!/bin/sh\necho '+++ Building go targets'\nsleep 1.5\nmkdir -p _output/bin\n"
        "printf '#!/bin/sh\\necho Kubernetes v1.20.2\\n' > _output/bin/kube-apiserver\n"
        "chmod +x _output/bin/kube-apiserver\n",
        "etcd": '#!/bin/sh\necho "etcd Version: 3.4.23"\n',
        **dict.fromkeys(("go", "rsync", "jq", "dpkg-source"), "#!/bin/sh\n"),
    }
    for name, text in fakes.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    env = {
        **os.environ,
        "KUBE_ASSETS_DIR": str(assets),
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "PROGRESS_EVERY": "0.3",
    }
    done = run_script(env)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    ticks = [i for i, line in enumerate(lines) if "... still building kube-apiserver (" in line]
    built = next(i for i, line in enumerate(lines) if line.startswith("[kube-assets] built in "))
    assert ticks and ticks[-1] < built, done.stderr
    assert done.stdout.splitlines() == [str(assets)]
