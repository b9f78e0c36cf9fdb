"""The controllers' shared predicates: label selectors, tolerations, whether a pod fits a node."""

from __future__ import annotations

from localworld.simulator.objects import fits, selector_matches, tolerates


def test_selectors_and_tolerations() -> None:
    sel = {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["fe"]}]}
    assert selector_matches(sel, {"app": "web", "tier": "fe"}, empty_matches=False)
    assert not selector_matches(sel, {"app": "web", "tier": "be"}, empty_matches=False)
    assert selector_matches({"matchExpressions": [{"key": "x", "operator": "DoesNotExist"}]}, {}, empty_matches=False)
    taint = {"key": "node-role.kubernetes.io/master", "effect": "NoSchedule"}
    assert tolerates([{"operator": "Exists"}], taint)
    assert tolerates([{"key": "node-role.kubernetes.io/master", "operator": "Exists", "effect": "NoSchedule"}], taint)
    assert not tolerates([{"key": "other", "operator": "Exists"}], taint)
    node = {
        "metadata": {"labels": {"zone": "a"}},
        "spec": {"unschedulable": True, "taints": [taint]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    tolerant = {"tolerations": [{"operator": "Exists"}]}
    assert not fits(tolerant, node)
    assert fits(tolerant, node, ignore_unschedulable=True)
    assert not fits({}, node, ignore_unschedulable=True)
    assert not fits({**tolerant, "nodeSelector": {"zone": "b"}}, node, ignore_unschedulable=True)
