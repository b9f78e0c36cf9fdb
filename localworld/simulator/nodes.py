"""Cloud node lifecycle and kubelet registration: a Node per running or pending EC2 instance of the cluster.

A Node per instance tagged ``KubernetesCluster=<cluster>`` (kOps propagates the tag), named by private DNS name or
instance id, with ``spec.providerID = aws:///<az>/<instance-id>`` and kOps' labels, marked Ready through the status
subresource. The Node is deleted when its instance is shutting-down, terminated or gone (the cloud node controller
does this). Only Nodes this simulator registered (annotated ``localworld.node-manager/simulated``) are touched.

Facts come from moto's EC2 through a poller thread (``poll_ec2``); the instances it read are the input of ``plan``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes.client.exceptions import ApiException

from core.kops import CLUSTER_TAG, INSTANCE_GROUP_TAG, MASTER_ROLE_TAGS
from localworld.rest import JSON, q
from localworld.simulator.base import Action, Controller, Shared, View
from localworld.simulator.objects import PATHS, node_ready, now_rfc3339

log = logging.getLogger(__name__)

SIMULATED_ANNOTATION = "localworld.node-manager/simulated"
MASTER_TAINT = {"key": "node-role.kubernetes.io/master", "effect": "NoSchedule"}
LIVE_STATES = ("pending", "running")
GONE_STATES = ("shutting-down", "terminated")
# the states the EC2 polls ask for: every one but terminated, which AWS lists for about an hour after and moto for ever;
# an instance missing from a read is gone (``plan``), so leaving them out changes nothing but the size of each answer
# (at 60 workers refreshed, 126 instances listed instead of 66: DescribeInstances took 240 ms of moto's CPU, not 114)
POLLED_STATES = ["pending", "running", "shutting-down", "stopping", "stopped"]
_POLLED = [{"Name": "instance-state-name", "Values": POLLED_STATES}]
EC2_FULL_RESYNC = 5.0  # seconds between full DescribeInstances reads when nothing seems to change


class NodeLifecycle(Controller):
    """Registers, readies and deletes Nodes to follow the cluster's EC2 instances.

    Args:
        shared: the simulator's shared parts.
        ec2_client: boto3 EC2 client (moto); used only by the ``poll_ec2`` thread.
        cluster_name: the ``KubernetesCluster`` tag value whose instances become Nodes.
        node_naming: ``"dns"`` (private DNS name) or ``"id"`` (instance id).
        ec2_interval: seconds between DescribeInstanceStatus polls.
        join_delay: seconds between first seeing an instance and its Node registering (may be changed while running).
    """

    def __init__(
        self,
        shared: Shared,
        ec2_client: Any,
        cluster_name: str,
        *,
        node_naming: str,
        ec2_interval: float,
        join_delay: float,
    ) -> None:
        super().__init__(shared)
        self.ec2 = ec2_client
        self.cluster = cluster_name
        self.node_naming = node_naming
        self.ec2_interval = ec2_interval
        self.join_delay = join_delay
        self.instances: dict[str, JSON] | None = None  # None until the first DescribeInstances read
        self._never_join: set[str] = set()
        self._first_seen: dict[str, float] = {}
        self._lock = threading.Lock()

    def never_join(self, instance_id: str) -> None:
        """The instance never gets a Node (a node that fails to join)."""
        with self._lock:
            self._never_join.add(instance_id)

    def allow_join(self, instance_id: str) -> None:
        with self._lock:
            self._never_join.discard(instance_id)

    # ------------------------------------------------------------------ EC2
    def poll_ec2(self, stop: threading.Event, wake: threading.Event, on_error: Callable[[], None]) -> None:
        """Poll EC2 until ``stop``: a cheap DescribeInstanceStatus every ``ec2_interval`` s detects a change (moto
        renders it in ~10 ms, DescribeInstances in ~35 ms of CPU); the cluster's instances are re-read on a change and
        at least every ``EC2_FULL_RESYNC`` s, then ``wake`` is set. A failed poll calls ``on_error`` and is logged."""
        last_status: set[tuple[str, str]] | None = None
        last_full = 0.0
        while not stop.is_set():
            try:
                statuses = self.ec2.describe_instance_status(IncludeAllInstances=True, Filters=_POLLED)
                current = {(s["InstanceId"], s["InstanceState"]["Name"]) for s in statuses["InstanceStatuses"]}
                while statuses.get("NextToken"):
                    statuses = self.ec2.describe_instance_status(
                        IncludeAllInstances=True, Filters=_POLLED, NextToken=statuses["NextToken"]
                    )
                    current |= {(s["InstanceId"], s["InstanceState"]["Name"]) for s in statuses["InstanceStatuses"]}
                if current != last_status or time.monotonic() - last_full >= EC2_FULL_RESYNC:
                    self.instances = self._describe_cluster_instances()
                    last_status, last_full = current, time.monotonic()
                    wake.set()
            except Exception:
                if stop.is_set():
                    return
                on_error()
                log.exception("EC2 poll failed")
            stop.wait(self.ec2_interval)

    def _describe_cluster_instances(self) -> dict[str, JSON]:
        pages = self.ec2.get_paginator("describe_instances").paginate(
            Filters=[{"Name": f"tag:{CLUSTER_TAG}", "Values": [self.cluster]}, *_POLLED]
        )
        return {inst["InstanceId"]: inst for page in pages for res in page["Reservations"] for inst in res["Instances"]}

    # ------------------------------------------------------------------ plan
    def _node_name(self, inst: Mapping[str, Any]) -> str:
        if self.node_naming == "id" or not inst.get("PrivateDnsName"):
            return str(inst["InstanceId"])
        return str(inst["PrivateDnsName"])

    def plan(self, view: View, actions: list[Action]) -> None:
        instances = self.instances or {}
        now = time.monotonic()
        with self._lock:
            never = set(self._never_join)
        by_instance: dict[str, JSON] = {}
        for node in view.nodes.values():
            provider = (node.get("spec") or {}).get("providerID", "")
            if provider.startswith("aws:///"):
                by_instance[provider.rsplit("/", 1)[-1]] = node
        for iid, inst in instances.items():
            state = inst["State"]["Name"]
            if state in LIVE_STATES:
                self._first_seen.setdefault(iid, now)
            if state not in LIVE_STATES or iid in never or iid in by_instance:
                continue
            if now - self._first_seen[iid] < self.join_delay:
                continue
            if self.recent.check("register", iid, hold=5.0):
                continue
            actions.append((f"register node for {iid}", lambda inst=inst: self._register(inst)))
        for iid, node in by_instance.items():
            annotations = node["metadata"].get("annotations") or {}
            if annotations.get(SIMULATED_ANNOTATION) != "true":
                continue
            inst = instances.get(iid)
            gone = inst is None or inst["State"]["Name"] in GONE_STATES
            name = node["metadata"]["name"]
            if gone and not self.recent.check("delete-node", name):
                actions.append((f"delete node {name}", lambda name=name: self._delete_node(name)))
            elif not gone and not node_ready(node) and not self.recent.check("node-ready", name):
                actions.append((f"mark node {name} Ready", lambda inst=inst, name=name: self._mark_ready(name, inst)))

    # ------------------------------------------------------------------ writes
    def _register(self, inst: Mapping[str, Any]) -> None:
        tags = {t["Key"]: t.get("Value", "") for t in inst.get("Tags") or []}
        master = any(t in tags for t in MASTER_ROLE_TAGS)
        name = self._node_name(inst)
        az = inst["Placement"]["AvailabilityZone"]
        labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux",
            "beta.kubernetes.io/arch": "amd64",
            "topology.kubernetes.io/zone": az,
            "topology.kubernetes.io/region": az[:-1],
            "node.kubernetes.io/instance-type": inst.get("InstanceType", ""),
            "kubernetes.io/role": "master" if master else "node",
        }
        if tags.get(INSTANCE_GROUP_TAG):
            labels["kops.k8s.io/instancegroup"] = tags[INSTANCE_GROUP_TAG]
        if master:
            labels["node-role.kubernetes.io/master"] = ""
            labels["node-role.kubernetes.io/control-plane"] = ""
        else:
            labels["node-role.kubernetes.io/node"] = ""
        if inst.get("InstanceLifecycle") == "spot":
            labels["node.kubernetes.io/lifecycle"] = "spot"
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": labels,
                "annotations": {SIMULATED_ANNOTATION: "true"},
            },
            "spec": {
                "providerID": f"aws:///{az}/{inst['InstanceId']}",
                "taints": [MASTER_TAINT] if master else [],
            },
        }
        try:
            created = self.rest.post(PATHS["nodes"], body)
        except ApiException as err:
            if err.status != 409:
                raise
            created = self.rest.get(f"{PATHS['nodes']}/{q(name)}")
        self.informers["nodes"].apply(created)
        self._mark_ready(name, inst)
        log.debug("registered node %s for %s", name, inst["InstanceId"])

    def _mark_ready(self, name: str, inst: Mapping[str, Any] | None) -> None:
        ts = now_rfc3339()
        addresses = [{"type": "Hostname", "address": name}]
        if inst is not None and inst.get("PrivateIpAddress"):
            addresses.insert(0, {"type": "InternalIP", "address": inst["PrivateIpAddress"]})
        if inst is not None and inst.get("PrivateDnsName"):
            addresses.append({"type": "InternalDNS", "address": inst["PrivateDnsName"]})
        resources = {"cpu": "2", "memory": "8Gi", "pods": "110", "ephemeral-storage": "100Gi"}
        status = {
            "status": {
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "kubelet is posting ready status (simulated)",
                        "lastHeartbeatTime": ts,
                        "lastTransitionTime": ts,
                    }
                ],
                "addresses": addresses,
                "capacity": resources,
                "allocatable": resources,
                "nodeInfo": {
                    "kubeletVersion": "v1.20.2",
                    "kubeProxyVersion": "v1.20.2",
                    "operatingSystem": "linux",
                    "architecture": "amd64",
                    "containerRuntimeVersion": "containerd://1.4.3",
                    "osImage": "Ubuntu 20.04 LTS (simulated)",
                    "kernelVersion": "5.4.0",
                    "machineID": "",
                    "systemUUID": "",
                    "bootID": "",
                },
            }
        }
        updated = self.rest.patch(f"{PATHS['nodes']}/{q(name)}/status", status)
        self.informers["nodes"].apply(updated)

    def _delete_node(self, name: str) -> None:
        self.rest.delete_quiet(f"{PATHS['nodes']}/{q(name)}")
        log.debug("deleted node %s (instance gone)", name)
