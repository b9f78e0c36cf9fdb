"""Pods made from a controller's template, and pods grouped by their controller."""

from __future__ import annotations

from localworld.simulator.pods import new_pod, owned_pods, pod_path

from .helpers import pod


def test_new_pod_copies_the_template_and_is_controlled_by_its_owner() -> None:
    owner = {
        "metadata": {"name": "web-1", "namespace": "ns", "uid": "rs-uid"},
        "spec": {"template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c"}]}}},
    }
    body = new_pod(owner, "ReplicaSet", "node-a")
    assert body["metadata"]["generateName"] == "web-1-"
    assert body["metadata"]["labels"] == {"app": "web"}
    assert body["metadata"]["ownerReferences"][0] == {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": "web-1",
        "uid": "rs-uid",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert body["spec"]["nodeName"] == "node-a"
    assert "nodeName" not in owner["spec"]["template"]["spec"]
    assert "nodeName" not in new_pod(owner, "ReplicaSet", None)["spec"]


def test_owned_pods_groups_by_controller_uid() -> None:
    pods = {"ns/a": pod("a", owner="x"), "ns/b": pod("b", owner="x"), "ns/c": pod("c")}
    assert {uid: [p["metadata"]["name"] for p in group] for uid, group in owned_pods(pods).items()} == {"x": ["a", "b"]}
    assert pod_path(pods["ns/a"]) == "/api/v1/namespaces/ns/pods/a"
