"""The CDK CLI the deploy guide uses is pinned once (package.json), documented with the same version, and newer than
the aws-cdk-lib the app is built with (a CDK CLI supports the aws-cdk-lib releases older than itself; from 2.1000.0
the CLI is versioned apart from the library)."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_cli_is_pinned_and_documented_with_the_same_version() -> None:
    pinned = json.loads((ROOT / "package.json").read_text())["devDependencies"]["aws-cdk"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", pinned), "an exact version, not a range"
    guide = (ROOT / "docs" / "DEPLOY.md").read_text()
    assert set(re.findall(r"aws-cdk@([\d.]+)", guide)) == {pinned}
    assert f"CDK CLI | {pinned}" in guide
    lib = re.search(r"^aws-cdk-lib==([\d.]+)$", (ROOT / "requirements-dev.txt").read_text(), re.M)
    assert lib is not None and f"aws-cdk-lib {lib.group(1)}" in guide
    major, minor, _ = (int(p) for p in pinned.split("."))
    assert major == 2 and minor >= 1000  # the CLI's own release line, newer than every 2.x library


def test_the_readme_links_the_deploy_guide() -> None:
    assert "](docs/DEPLOY.md)" in (ROOT / "README.md").read_text()
