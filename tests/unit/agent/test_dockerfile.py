"""The agent's Dockerfile is consistent with what the tests run (no Docker engine here to build it):

- the base image is pinned (a digest, or an exact patch tag) to the Python minor version of the test interpreter;
- it installs requirements.txt as it is and nothing else, and every third-party module the agent's code imports is
  provided by a requirement or a dependency of one (read from the installed distributions' metadata);
- it runs ``python -m agent`` as the non-root user and on the port the Deployment uses.
"""

from __future__ import annotations

import ast
import re
import sys
from importlib import metadata
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]
DOCKERFILE = ROOT / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            out.append((keyword.upper(), rest.strip()))
    return out


def requirement_names() -> set[str]:
    names = set()
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==[\w.]+$", line)
            assert match, f"requirements.txt pins exact versions: {line!r}"
            names.add(norm(match.group(1)))
    return names


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(names: set[str]) -> set[str]:
    """The distributions ``names`` bring in (their installed metadata's Requires-Dist, recursively, extras too)."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for req in requires:
            match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)", req)
            if match and 'python_version < "3' not in req:
                todo.append(norm(match.group(1)))
    return seen


def third_party_imports() -> set[str]:
    local = {"agent", "core", "adapters", "lambdas", "localworld"}
    found = set()
    for package in ("agent", "core", "adapters"):
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    found |= {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    found.add(node.module.split(".")[0])
    return {
        name for name in found if name not in local and name not in sys.stdlib_module_names and name != "__future__"
    }


def test_the_base_image_is_pinned_to_the_tested_python() -> None:
    [base] = [rest for keyword, rest in instructions() if keyword == "FROM"]
    digest = re.match(r"^python:[\w.-]+@sha256:[0-9a-f]{64}$", base)
    tag = re.match(r"^python:(\d+)\.(\d+)\.(\d+)-slim(-\w+)?$", base)
    assert digest or tag, f"base image not pinned: {base}"
    if tag:
        assert (int(tag.group(1)), int(tag.group(2))) == sys.version_info[:2]


def test_it_installs_requirements_txt_and_nothing_else() -> None:
    steps = instructions()
    runs = [rest for keyword, rest in steps if keyword == "RUN"]
    installs = [run for run in runs if "pip" in run]
    assert installs == ["pip install --no-cache-dir -r requirements.txt"]
    copied = [rest for keyword, rest in steps if keyword == "COPY"]
    assert copied.index("requirements.txt ./") < [k for k, _ in steps if k in ("COPY", "RUN")].index("RUN")
    assert {"core/ ./core/", "adapters/ ./adapters/", "agent/ ./agent/"} <= set(copied)
    ignored = (ROOT / ".dockerignore").read_text().splitlines()
    assert {"!requirements.txt", "!core/", "!adapters/", "!agent/"} <= set(ignored)


def test_every_module_the_agent_imports_comes_from_the_requirements() -> None:
    provided = closure(requirement_names())
    by_module = metadata.packages_distributions()
    missing = {}
    for module in sorted(third_party_imports()):
        dists = {norm(d) for d in by_module.get(module, [])}
        if not dists & provided:
            missing[module] = sorted(dists)
    assert missing == {}, f"imported by agent/, core/ or adapters/ but not installed by requirements.txt: {missing}"
    assert "prometheus-client" in requirement_names() and "kubernetes" in requirement_names()


def test_it_runs_the_agent_as_the_deployments_non_root_user_on_its_port() -> None:
    steps = {k: r for k, r in instructions() if k in ("USER", "EXPOSE", "ENTRYPOINT")}
    deployment = yaml.safe_load((ROOT / "agent" / "deploy" / "manager" / "deployment.yaml").read_text())
    pod = deployment["spec"]["template"]["spec"]
    uid, _, gid = steps["USER"].partition(":")
    assert int(uid) != 0 and int(uid) == pod["securityContext"]["runAsUser"]
    assert int(gid) == pod["securityContext"]["runAsGroup"]
    [container] = pod["containers"]
    assert int(steps["EXPOSE"]) == container["ports"][0]["containerPort"]
    assert steps["ENTRYPOINT"] == '["python", "-m", "agent"]'
