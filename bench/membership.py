"""Benchmark of the agent's membership resync at 200, 1,000 and 2,000 nodes (not a test; results go to BENCHMARKS.md).

Setup: a kube-apiserver + etcd (``localworld.kube.KubeApiServer``) and a moto server holding the state table. Nodes
are created as a kOps worker registers them (``node_body``: 15 labels, 5 annotations, addresses, capacity, the
four conditions, node info and 3 images; about 3.2 KB of JSON each, as measured on a real 2,001-node list of
6.4 MB), grown size after size. Their providerIDs name instances in no Auto Scaling group (the ASG lookup answers
None for each, with the same number of DescribeAutoScalingInstances calls as for members).

For each size and each tree (``after``: this checkout; ``before``: ``--before-ref``, exported with ``git archive``
to a temporary folder), a fresh process (``bench/membership_probe.py``) imports the agent and runs ``--resyncs``
resyncs against an emptied table: the first one is cold (every item written), the next ones are the steady state
of a cluster that did not change (the reporter's clock advanced one resync period each time). Reported per size and
tree: DynamoDB writes of the cold resync; per steady resync (median) the DynamoDB writes, every AWS call, CPU
seconds and wall seconds; the RSS after the last resync and the peak RSS (``VmHWM``); and, for ``after``, the
steady-state average of TTL refreshes per resync (``refresh_age_seconds`` of the listed instance ids: writes that
come only once an item's age reaches it, so a few resyncs in a row do not show them).

Usage: ``python -m bench.membership [--sizes 200 1000 2000] [--resyncs 4] [--before-ref main] [--markdown]``;
``--smoke`` measures this tree only at 20 nodes with 2 resyncs and does not judge.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from agent.membership_records import refresh_age_seconds
from core import schema
from core.settings import AgentSettings
from localworld.aws import MotoServer
from localworld.kube import KubeApiServer

ROOT = Path(__file__).resolve().parent.parent
PROBE = ROOT / "bench" / "membership_probe.py"
TABLE = "node-manager-state"
CLUSTER = "bench.k8s.local"
RSS_TARGET_MIB = 100
WRITES = ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem")
IMAGES = ("kube-proxy", "pause", "cilium/cilium")


def instance_id(n: int) -> str:
    return f"i-0{n:016x}"


def node_body(n: int) -> dict[str, Any]:
    """A worker Node as kOps and the kubelet leave it (status included: nodes may be created with their status)."""
    az = ("us-east-1a", "us-east-1b", "us-east-1c")[n % 3]
    name = f"ip-10-{n // 65536 % 256}-{n // 256 % 256}-{n % 256}.ec2.internal"
    ip = name[3:].split(".")[0].replace("-", ".")
    when = "2026-12-01T10:00:00Z"
    labels = {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/instance-type": "m5.large",
        "beta.kubernetes.io/os": "linux",
        "failure-domain.beta.kubernetes.io/region": "us-east-1",
        "failure-domain.beta.kubernetes.io/zone": az,
        "kops.k8s.io/instancegroup": f"nodes-{az}",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node-role.kubernetes.io/node": "",
        "node.kubernetes.io/instance-type": "m5.large",
        "node.kubernetes.io/lifecycle": "spot",
        "topology.ebs.csi.aws.com/zone": az,
        "topology.kubernetes.io/region": "us-east-1",
        "topology.kubernetes.io/zone": az,
    }
    annotations = {
        "csi.volume.kubernetes.io/nodeid": json.dumps({"ebs.csi.aws.com": instance_id(n)}),
        "node.alpha.kubernetes.io/ttl": "0",
        "volumes.kubernetes.io/controller-managed-attach-detach": "true",
        "io.cilium.network.ipv4-cilium-host": ip,
        "io.cilium.network.ipv4-pod-cidr": "100.96.0.0/24",
    }
    conditions = [
        {"type": kind, "status": "False", "reason": f"KubeletHas{reason}", "message": f"kubelet has {reason}"}
        for kind, reason in (
            ("MemoryPressure", "SufficientMemory"),
            ("DiskPressure", "NoDiskPressure"),
            ("PIDPressure", "SufficientPID"),
        )
    ] + [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}]
    for condition in conditions:
        condition.update(lastHeartbeatTime=when, lastTransitionTime=when)
    images = [
        {
            "names": [f"registry.k8s.io/{image}:v1.28.{n % 10}"],
            "sizeBytes": 1000000 + n,
        }
        for image in IMAGES
    ]
    resources = {
        "cpu": "2",
        "ephemeral-storage": "122749536Ki",
        "hugepages-1Gi": "0",
        "memory": "7934456Ki",
        "pods": "110",
    }
    return {
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": {"providerID": f"aws:///{az}/{instance_id(n)}", "podCIDR": "100.96.0.0/24"},
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": ip},
                {"type": "Hostname", "address": name},
                {"type": "InternalDNS", "address": name},
            ],
            "capacity": resources,
            "allocatable": resources,
            "conditions": conditions,
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": f"{n:032x}",
                "containerRuntimeVersion": "containerd://1.7.13",
                "kernelVersion": "6.1.0-18-cloud-amd64",
                "kubeProxyVersion": "v1.28.7",
                "kubeletVersion": "v1.28.7",
                "machineID": f"{n:032x}",
                "operatingSystem": "linux",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "systemUUID": f"ec2{n:029x}",
            },
            "images": images,
        },
    }


def grow_nodes(api: k8s.ApiClient, have: int, want: int) -> None:
    """Create nodes ``have`` .. ``want - 1`` (8 requests in flight)."""
    core = k8s.CoreV1Api(api)

    def create(n: int) -> k8s.V1Node:
        return core.create_node(node_body(n))  # type: ignore[arg-type]  # kubernetes client: validate_call takes a dict

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(create, range(have, want)))


def list_bytes(api: k8s.ApiClient) -> int:
    """Bytes of one unpaged list of every node (what the agent read at once before the lists were paged)."""
    response = k8s.CoreV1Api(api).list_node(_preload_content=False)
    return len(response.data)  # type: ignore[attr-defined]  # kubernetes client: a urllib3 response here


@contextmanager
def exported(ref: str) -> Iterator[Path]:
    """The tree of ``ref`` in a temporary folder (``git archive``; the repository is only read)."""
    with tempfile.TemporaryDirectory(prefix="anm-bench-membership-") as folder:
        archive = subprocess.run(["git", "archive", ref], cwd=ROOT, check=True, capture_output=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(folder, filter="data")
        yield Path(folder)


def empty_table(moto: MotoServer) -> None:
    """Delete every item of the state table (each tree's first resync starts cold)."""
    table = moto.resource("dynamodb").Table(TABLE)
    with table.batch_writer() as batch:
        for item in table.scan(ProjectionExpression="pk, sk")["Items"]:
            batch.delete_item(Key={"pk": item["pk"], "sk": item["sk"]})


def probe(tree: Path, kube: KubeApiServer, moto: MotoServer, resyncs: int, settings: AgentSettings) -> dict[str, Any]:
    """Run ``bench/membership_probe.py`` on ``tree``; its JSON line."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
        **moto.env(),
        "PYTHONPATH": str(tree),
        "KUBECONFIG": str(kube.kubeconfig),
        "PROBE_TABLE": TABLE,
        "PROBE_CLUSTER": CLUSTER,
        "PROBE_RESYNCS": str(resyncs),
        "PROBE_RESYNC_SECONDS": str(settings.membership_resync_seconds),
        "PROBE_TTL_SECONDS": str(settings.membership_ttl_seconds),
    }
    out = subprocess.run([sys.executable, str(PROBE)], cwd=tree, env=env, check=True, capture_output=True, text=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def dynamo_writes(calls: dict[str, int]) -> int:
    return sum(v for k, v in calls.items() if k.split(".")[-1] in WRITES)


def summary(size: int, tree: str, measured: dict[str, Any], settings: AgentSettings) -> dict[str, Any]:
    cold, steady = measured["resyncs"][0], measured["resyncs"][1:] or measured["resyncs"]
    calls = {key: statistics.median(r["calls"].get(key, 0) for r in steady) for r in steady for key in r["calls"]}
    row = {
        "size": size,
        "tree": tree,
        "cold_writes": dynamo_writes(cold["calls"]),
        "writes": statistics.median(dynamo_writes(r["calls"]) for r in steady),
        "calls": calls,
        "cpu": statistics.median(r["cpu_seconds"] for r in steady),
        "wall": statistics.median(r["wall_seconds"] for r in steady),
        "rss_start": measured["started_rss_mib"],
        "rss": measured["resyncs"][-1]["rss_mib"],
        "peak": measured["peak_rss_mib"],
        "refreshes": None,
    }
    if tree == "after":
        period, ttl = settings.membership_resync_seconds, settings.membership_ttl_seconds
        ages = (refresh_age_seconds(instance_id(n), ttl, period) for n in range(size))
        row["refreshes"] = sum(period / max(period, age) for age in ages)
    return row


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| nodes | tree | cold resync: DynamoDB writes | steady resync: DynamoDB writes | + TTL refreshes (average) "
        "| other AWS calls | CPU s | wall s | RSS before the first resync, MiB | RSS after, MiB | peak RSS, MiB |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        other = ", ".join(f"{k} {v:g}" for k, v in sorted(r["calls"].items()) if dynamo_writes({k: 1}) == 0)
        refreshes = "-" if r["refreshes"] is None else f"{r['refreshes']:.1f}"
        lines.append(
            f"| {r['size']:,} | {r['tree']} | {r['cold_writes']:,} | {r['writes']:g} | {refreshes} | {other} "
            f"| {r['cpu']:.2f} | {r['wall']:.2f} | {r['rss_start']:.1f} | {r['rss']:.1f} | {r['peak']:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.membership", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[200, 1000, 2000])
    parser.add_argument("--resyncs", type=int, default=4, help="resyncs per process (the first is cold)")
    parser.add_argument("--before-ref", default="main", help="git ref measured as 'before'; '' to skip")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="this tree only, 20 nodes, 2 resyncs; not judged")
    args = parser.parse_args(argv)
    if args.smoke:
        args.sizes, args.resyncs, args.before_ref = [20], 2, ""
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    settings = AgentSettings(cluster_name=CLUSTER, table_name=TABLE, queue_url="unused")
    rows = []
    with KubeApiServer() as kube, MotoServer() as moto, exported_or_none(args.before_ref) as before:
        moto.client("dynamodb").create_table(**schema.state_table(TABLE))
        api = kube.api_client("admin")
        have = 0
        for size in sorted(args.sizes):
            grow_nodes(api, have, size)
            have = size
            print(f"{size} nodes: one unpaged list is {list_bytes(api) / 1e6:.1f} MB", file=sys.stderr)
            trees = [("before", before), ("after", ROOT)] if before is not None else [("after", ROOT)]
            for name, tree in trees:
                empty_table(moto)
                row = summary(size, name, probe(tree, kube, moto, args.resyncs, settings), settings)
                rows.append(row)
                print(json.dumps(row), file=sys.stderr)
    print(markdown(rows) if args.markdown else json.dumps(rows, indent=1))
    over = [r for r in rows if r["tree"] == "after" and r["size"] >= 2000 and r["peak"] > RSS_TARGET_MIB]
    if over and not args.smoke:
        print(f"peak RSS over the {RSS_TARGET_MIB} MiB target at {[r['size'] for r in over]}", file=sys.stderr)
        return 1
    return 0


@contextmanager
def exported_or_none(ref: str) -> Iterator[Path | None]:
    """``exported(ref)``, or None without a ref."""
    if not ref:
        yield None
        return
    with exported(ref) as folder:
        yield folder


if __name__ == "__main__":
    sys.exit(main())
