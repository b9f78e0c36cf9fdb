"""Applies the agent's RBAC manifests (``agent/deploy/rbac/*.yaml``) to the local world, unchanged.

The same files are the agent's deployment manifests, so a test that runs the agent with the agent kubeconfig proves
it needs nothing beyond them (least privilege).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from kubernetes.client.exceptions import ApiException

from localworld.rest import KubeRest, q

RBAC_DIR = Path(__file__).resolve().parent.parent / "agent" / "deploy" / "rbac"

# kind -> (API prefix, plural, namespaced)
_KINDS: dict[str, tuple[str, str, bool]] = {
    "ClusterRole": ("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "Role": ("/apis/rbac.authorization.k8s.io/v1", "roles", True),
    "RoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
    "ServiceAccount": ("/api/v1", "serviceaccounts", True),
}


def manifests(folder: Path = RBAC_DIR) -> Iterator[dict[str, Any]]:
    """Every YAML document in ``folder`` (sorted by file name), skipping empty ones and the kustomize file."""
    for path in sorted(folder.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                yield doc


def apply_agent_rbac(rest: KubeRest, folder: Path = RBAC_DIR) -> list[str]:
    """Create or replace each RBAC object of ``folder`` (admin client needed). Returns ``["Kind/name", ...]``.

    Raises:
        FileNotFoundError: ``folder`` holds no manifest (an install without the package data ``agent/deploy``):
            the agent would run without its permissions.
        ValueError: a manifest has a kind this helper does not know.
        ApiException: the API refused an object.
    """
    docs = list(manifests(folder))
    if not docs:
        raise FileNotFoundError(
            f"no RBAC manifests in {folder}: the agent's permissions (agent/deploy/rbac/*.yaml) are missing from this "
            "install; reinstall with `pip install .` from a checkout (pyproject.toml ships agent/deploy)"
        )
    applied = []
    for doc in docs:
        kind = doc["kind"]
        if kind not in _KINDS:
            raise ValueError(f"unsupported kind {kind} in {folder}")
        prefix, plural, namespaced = _KINDS[kind]
        meta = doc["metadata"]
        base = f"{prefix}/namespaces/{q(meta['namespace'])}/{plural}" if namespaced else f"{prefix}/{plural}"
        try:
            rest.post(base, doc)
        except ApiException as err:
            if err.status != 409:
                raise
            current = rest.get(f"{base}/{q(meta['name'])}")
            doc = {**doc, "metadata": {**meta, "resourceVersion": current["metadata"]["resourceVersion"]}}
            rest.put(f"{base}/{q(meta['name'])}", doc)
        applied.append(f"{kind}/{meta['name']}")
    return applied
