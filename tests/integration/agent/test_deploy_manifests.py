"""The agent's manifests (agent/deploy, kustomize bases rbac/, manager/, default/): rendered with kubectl's
kustomize, checked for what the issue asks of them, and validated by the local kube-apiserver with a server-side
dry run (admin kubeconfig).

The manifests use ``policy/v1`` for the PodDisruptionBudget (Kubernetes >= 1.21, the only version from 1.25). The
local apiserver is v1.20, which serves PodDisruptionBudgets only at ``policy/v1beta1`` (same fields): the dry run
gets the rendered PDB at that version, everything else as rendered.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from localworld.world import LocalWorld

ROOT = Path(__file__).resolve().parents[3]
DEFAULT = ROOT / "agent" / "deploy" / "default"
SINGLE_MASTER = ROOT / "agent" / "deploy" / "single-master"


def render(overlay: Path = DEFAULT) -> list[dict[str, Any]]:
    out = subprocess.run(
        ["kubectl", "kustomize", str(overlay)], check=True, capture_output=True, text=True, timeout=60
    ).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    [doc] = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    return doc


def test_rbac_is_exactly_what_the_agent_uses() -> None:
    docs = render()
    rules = {
        (tuple(r["apiGroups"]), tuple(r["resources"])): sorted(r["verbs"]) for r in one(docs, "ClusterRole")["rules"]
    }
    assert rules == {
        (("",), ("nodes",)): ["get", "list", "patch", "watch"],
        (("",), ("pods",)): ["delete", "get", "list", "watch"],
        (("",), ("pods/eviction",)): ["create"],
        (("apps",), ("daemonsets",)): ["get"],
        (("",), ("events",)): ["create"],  # agent/events.py creates, never patches
    }
    role = one(docs, "Role")
    assert role["metadata"]["namespace"] == "node-manager"
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]}
    ]
    assert not any("leases" in r["resources"] for r in one(docs, "ClusterRole")["rules"])
    account = one(docs, "ServiceAccount", "agent")
    assert account["metadata"]["annotations"]["eks.amazonaws.com/role-arn"].startswith("arn:aws:iam::")


def test_the_deployment_is_two_replicas_on_control_plane_nodes_restricted_and_probed() -> None:
    docs = render()
    deployment = one(docs, "Deployment")
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    [container] = pod["containers"]
    assert spec["replicas"] == 2
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in pod["affinity"]["podAntiAffinity"]
    anti = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
    assert anti["topologyKey"] == "kubernetes.io/hostname"
    assert anti["labelSelector"]["matchLabels"] == spec["selector"]["matchLabels"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {t["matchExpressions"][0]["key"] for t in terms} == {
        "node-role.kubernetes.io/control-plane",
        "node-role.kubernetes.io/master",
    }
    assert {t["key"] for t in pod["tolerations"]} == {
        "node-role.kubernetes.io/control-plane",
        "node-role.kubernetes.io/master",
    }
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True and security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert set(container["resources"]["requests"]) == {"cpu", "memory"}
    assert set(container["resources"]["limits"]) == {"cpu", "memory"}
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    port = {p["name"]: p["containerPort"] for p in container["ports"]}["http"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["AGENT_HTTP_PORT"] == str(port)
    settings = one(docs, "ConfigMap")
    assert container["envFrom"] == [{"configMapRef": {"name": settings["metadata"]["name"]}}]
    assert {"CLUSTER_NAME", "TABLE_NAME", "QUEUE_URL", "AWS_REGION"} <= set(settings["data"])
    # the shutdown fits in the grace period: SQS wait + in-flight grace (defaults 10 + 10) + release
    assert pod["terminationGracePeriodSeconds"] > 20
    pdb = one(docs, "PodDisruptionBudget")
    assert pdb["spec"]["maxUnavailable"] == 1 and pdb["spec"]["selector"] == spec["selector"]
    assert container["image"] == "node-manager-agent:0.1.0"


def test_the_apiserver_accepts_every_manifest_in_a_server_side_dry_run(world: LocalWorld) -> None:
    docs = render()
    for doc in docs:
        if doc["kind"] == "PodDisruptionBudget":
            assert doc["apiVersion"] == "policy/v1"
            doc["apiVersion"] = "policy/v1beta1"  # what v1.20 serves (see the module docstring)
    manifest = yaml.safe_dump_all(docs)
    result = subprocess.run(
        ["kubectl", "--kubeconfig", str(world.kubeconfig), "apply", "--dry-run=server", "-f", "-"],
        input=manifest,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == len(docs) and all("(server dry run)" in line for line in lines), result.stdout


@pytest.mark.parametrize("broken", ["replicas: two"])
def test_the_dry_run_catches_a_broken_manifest(world: LocalWorld, broken: str) -> None:
    deployment = one(render(), "Deployment")
    text = yaml.safe_dump(deployment).replace("replicas: 2", broken)
    result = subprocess.run(
        ["kubectl", "--kubeconfig", str(world.kubeconfig), "apply", "--dry-run=server", "--validate=false", "-f", "-"],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0


def drain_completes(docs: list[dict[str, Any]], masters: int) -> bool:
    """Whether draining one control-plane node finishes, by the rules that decide it: the replicas are placed on the
    ``masters`` (one per master while required anti-affinity allows, Pending beyond that; with preferred
    anti-affinity spread first, then shared), the drained master is cordoned, and each eviction is allowed only while
    the PDB's ``maxUnavailable`` is not reached (a Pending or evicted replica counts as unavailable; a replacement
    starts only on a master not cordoned that the affinity allows)."""
    deployment = one(docs, "Deployment")
    replicas = deployment["spec"]["replicas"]
    anti = deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    required = "requiredDuringSchedulingIgnoredDuringExecution" in anti
    pdbs = [d for d in docs if d["kind"] == "PodDisruptionBudget"]
    max_unavailable = pdbs[0]["spec"]["maxUnavailable"] if pdbs else replicas
    placed = [i % masters for i in range(replicas)]  # spread first
    pending = 0
    if required:
        pending = max(0, replicas - masters)
        placed = placed[: replicas - pending]
    drained = 0
    free = [m for m in range(masters) if m != drained and (not required or m not in placed)]
    for _ in [m for m in placed if m == drained]:
        if pending >= max_unavailable:
            return False  # 429: the PDB forbids this eviction, and nothing will change that
        placed.remove(drained)
        if free:  # the replacement starts elsewhere
            placed.append(free.pop(0) if required else (drained + 1) % masters)
        else:
            pending += 1
    return True


def test_a_single_master_cluster_can_drain_its_master_and_three_masters_keep_a_replica() -> None:
    default, single = render(DEFAULT), render(SINGLE_MASTER)
    assert drain_completes(single, masters=1)
    assert drain_completes(default, masters=3)
    assert drain_completes(default, masters=2)
    assert not drain_completes(default, masters=1)  # the PDB with both replicas on one cordoned master
    # the model catches the deadlock the issue found: required anti-affinity + the PDB on one master
    deployment = one(default, "Deployment")
    anti = deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    term = anti["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
    deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"] = {
        "requiredDuringSchedulingIgnoredDuringExecution": [term]
    }
    assert not drain_completes(default, masters=1)


def test_the_single_master_overlay_is_the_default_install_without_the_pdb() -> None:
    default, single = render(DEFAULT), render(SINGLE_MASTER)
    assert [d for d in default if d["kind"] != "PodDisruptionBudget"] == single


def test_the_apiserver_accepts_the_single_master_overlay(world: LocalWorld) -> None:
    result = subprocess.run(
        ["kubectl", "--kubeconfig", str(world.kubeconfig), "apply", "--dry-run=server", "-f", "-"],
        input=yaml.safe_dump_all(render(SINGLE_MASTER)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
