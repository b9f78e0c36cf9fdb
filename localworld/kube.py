"""A real kube-apiserver (v1.20) + etcd on 127.0.0.1, started the envtest way, for the local test world.

Binaries come from ``KUBEBUILDER_ASSETS`` (default ``~/.cache/aws-node-manager/kube-assets``), built once by
``scripts/install-kube-assets.sh``; ``localworld.kube_processes`` finds, spawns and stops them. The API server serves
TLS only (a throw-away CA signs its serving certificate), authenticates two static tokens (``--token-auth-file``):

- ``admin``: user ``admin`` in group ``system:masters`` (everything);
- ``agent``: user ``system:serviceaccount:node-manager:agent`` (what a pod running as the ``agent`` ServiceAccount
  of namespace ``node-manager`` would be), which can do only what RBAC grants it (see ``localworld/rbac.py``).

No kubelet, scheduler or controller-manager runs; ``localworld.simulator`` plays their parts. Without the
controller-manager a deleted Namespace never finishes terminating, so ``reset()`` empties namespaces and never deletes
them.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import os
import secrets
import shutil
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path

import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from localworld.kube_processes import (
    apiserver_argv,
    claim,
    etcd_argv,
    find_assets,
    free_port,
    remove_stale_dirs,
    spawn,
    terminate,
    wait_http,
    write_pki,
)
from localworld.rest import KubeRest, q

AGENT_NAMESPACE = "node-manager"
AGENT_SERVICE_ACCOUNT = "agent"
AGENT_USER = f"system:serviceaccount:{AGENT_NAMESPACE}:{AGENT_SERVICE_ACCOUNT}"

# Namespaces the API server owns; reset() never touches their objects.
SYSTEM_NAMESPACES = frozenset({"kube-system", "kube-public", "kube-node-lease"})

# Namespaced collections reset() empties, as (API prefix, plural). Pods go first (grace 0), then their owners.
RESET_COLLECTIONS: tuple[tuple[str, str], ...] = (
    ("/apis/apps/v1", "deployments"),
    ("/apis/apps/v1", "replicasets"),
    ("/apis/apps/v1", "daemonsets"),
    ("/apis/apps/v1", "statefulsets"),
    ("/apis/policy/v1beta1", "poddisruptionbudgets"),
    ("/api/v1", "pods"),
    ("/api/v1", "events"),
    ("/apis/coordination.k8s.io/v1", "leases"),
    ("/api/v1", "configmaps"),
)


class KubeApiServer:
    """etcd + kube-apiserver as child processes, with an admin and an agent kubeconfig.

    Args:
        assets_dir: folder with ``etcd`` and ``kube-apiserver`` (see ``find_assets``).
        workdir: folder for certificates, kubeconfigs and logs (default: a new temporary folder, removed on stop).
        start_timeout: seconds to wait for etcd and then for the API server's ``/readyz``.

    Attributes:
        url: ``https://127.0.0.1:<port>`` once started.
        kubeconfig: path of the admin kubeconfig (user ``admin``, group ``system:masters``).
        agent_kubeconfig: path of the agent kubeconfig (user ``system:serviceaccount:node-manager:agent``).
        tokens: ``{"admin": ..., "agent": ...}`` bearer tokens.

    Raises (from ``start``; both defined in ``localworld.kube_processes``):
        KubeAssetsMissingError: binaries missing.
        KubeStartError: a process exited or did not get ready within ``start_timeout``.
    """

    def __init__(
        self,
        assets_dir: str | os.PathLike[str] | None = None,
        workdir: str | os.PathLike[str] | None = None,
        start_timeout: float = 30.0,
    ) -> None:
        self.assets = find_assets(assets_dir)
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="localworld-kube-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.start_timeout = start_timeout
        self.tokens = {"admin": secrets.token_hex(16), "agent": secrets.token_hex(16)}
        self.url = ""
        self.kubeconfig = self.workdir / "admin.kubeconfig"
        self.agent_kubeconfig = self.workdir / "agent.kubeconfig"
        self._etcd: subprocess.Popen[bytes] | None = None
        self._apiserver: subprocess.Popen[bytes] | None = None
        self._etcd_dir: Path | None = None
        self._lock = threading.Lock()
        self._clients: list[k8s.ApiClient] = []
        self.startup_seconds: dict[str, float] = {}

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> KubeApiServer:
        """Start etcd, then kube-apiserver; return when ``/readyz`` answers ok. Idempotent."""
        if self._apiserver is not None:
            return self
        atexit.register(self.stop)
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        remove_stale_dirs()
        claim(self.workdir)
        pki = self.workdir / "pki"
        pki.mkdir(exist_ok=True)
        write_pki(pki)
        (self.workdir / "tokens.csv").write_text(
            f'{self.tokens["admin"]},admin,admin-uid,"system:masters"\n'
            f"{self.tokens['agent']},{AGENT_USER},agent-uid,"
            f'"system:serviceaccounts,system:serviceaccounts:{AGENT_NAMESPACE}"\n'
        )
        shm = Path("/dev/shm")
        self._etcd_dir = Path(tempfile.mkdtemp(prefix="localworld-etcd-", dir=shm if shm.is_dir() else None))
        claim(self._etcd_dir)

        t0 = time.monotonic()
        print("[localworld] starting etcd ...", flush=True)
        etcd_port, peer_port = free_port(), free_port()
        etcd_url = f"http://127.0.0.1:{etcd_port}"
        self._etcd = spawn("etcd", etcd_argv(self.assets, self._etcd_dir, etcd_port, peer_port), self.workdir)
        self._wait_http(f"{etcd_url}/health", self._etcd, "etcd", ssl_context=None)
        self.startup_seconds["etcd"] = time.monotonic() - t0
        print(f"[localworld] etcd ready in {self.startup_seconds['etcd']:.1f} s", flush=True)

        t1 = time.monotonic()
        print("[localworld] starting kube-apiserver ...", flush=True)
        port = free_port()
        self.url = f"https://127.0.0.1:{port}"
        argv = apiserver_argv(self.assets, etcd_url, port, pki, self.workdir / "tokens.csv")
        self._apiserver = spawn("kube-apiserver", argv, self.workdir)
        ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        self._wait_http(f"{self.url}/readyz", self._apiserver, "kube-apiserver", ssl_context=ctx)
        self.startup_seconds["kube-apiserver"] = time.monotonic() - t1
        print(f"[localworld] kube-apiserver ready in {self.startup_seconds['kube-apiserver']:.1f} s", flush=True)
        self._write_kubeconfig(self.kubeconfig, "admin", self.tokens["admin"])
        self._write_kubeconfig(self.agent_kubeconfig, "agent", self.tokens["agent"])
        self._ensure_namespace("default")
        self._ensure_namespace(AGENT_NAMESPACE)

    def _wait_http(
        self, url: str, proc: subprocess.Popen[bytes], name: str, ssl_context: ssl.SSLContext | None
    ) -> None:
        wait_http(
            url,
            proc,
            name,
            log_dir=self.workdir,
            timeout=self.start_timeout,
            token=self.tokens["admin"],
            ssl_context=ssl_context,
        )

    def _write_kubeconfig(self, path: Path, user: str, token: str) -> None:
        ca = (self.workdir / "pki" / "ca.crt").read_bytes()
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "localworld",
                    "cluster": {
                        "server": self.url,
                        "certificate-authority-data": base64.b64encode(ca).decode(),
                    },
                }
            ],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": user, "context": {"cluster": "localworld", "user": user}}],
            "current-context": user,
        }
        path.write_text(yaml.safe_dump(doc))
        os.chmod(path, 0o600)

    def stop(self) -> None:
        """Stop kube-apiserver, then etcd (SIGTERM, then SIGKILL after 5 s), wait for both, and remove temp files.

        Safe to call twice and from ``atexit``.
        """
        with self._lock:
            for client in self._clients:
                with contextlib.suppress(Exception):  # closing pools at shutdown: nothing to do about a failure
                    client.close()
            self._clients.clear()
            for proc in (self._apiserver, self._etcd):
                terminate(proc)
            self._apiserver = None
            self._etcd = None
            if self._etcd_dir is not None:
                shutil.rmtree(self._etcd_dir, ignore_errors=True)
                self._etcd_dir = None
            if self._own_workdir and os.environ.get("LOCALWORLD_KEEP") != "1":
                shutil.rmtree(self.workdir, ignore_errors=True)
        with contextlib.suppress(Exception):  # at interpreter exit atexit may already be torn down
            atexit.unregister(self.stop)

    def __enter__(self) -> KubeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._apiserver is not None and self._apiserver.poll() is None

    # ------------------------------------------------------------------ clients
    def configuration(self, token: str = "admin") -> k8s.Configuration:
        """A client ``Configuration`` for ``token`` (``"admin"`` or ``"agent"``) with a pool of 64 connections."""
        cfg = k8s.Configuration()
        path = self.kubeconfig if token == "admin" else self.agent_kubeconfig
        if token not in self.tokens:
            raise ValueError(f"unknown token {token!r}; use 'admin' or 'agent'")
        k8s_config.load_kube_config(config_file=str(path), client_configuration=cfg)
        cfg.connection_pool_maxsize = 64
        return cfg

    def api_client(self, token: str = "admin") -> k8s.ApiClient:
        """A new ``kubernetes.client.ApiClient`` (connection_pool_maxsize 64) authenticated as ``token``.

        Closed by ``stop()``.
        """
        api = k8s.ApiClient(self.configuration(token))
        with self._lock:
            self._clients.append(api)
        return api

    def rest(self, token: str = "admin") -> KubeRest:
        """A raw JSON client (``localworld.rest.KubeRest``) authenticated as ``token``."""
        return KubeRest(self.api_client(token))

    # ------------------------------------------------------------------ reset
    def _ensure_namespace(self, name: str) -> None:
        rest = KubeRest(self.api_client("admin"))
        try:
            rest.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        except ApiException as err:
            if err.status != 409:
                raise

    def namespaces(self) -> list[str]:
        rest = self._admin_rest()
        return [ns["metadata"]["name"] for ns in rest.get("/api/v1/namespaces").get("items", [])]

    def _admin_rest(self) -> KubeRest:
        if not hasattr(self, "_admin"):
            self._admin = KubeRest(self.api_client("admin"))
        return self._admin

    def reset(self, keep_namespaces: Iterable[str] = ()) -> None:
        """Delete every Node and, in every non-system namespace, the objects the world and tests create.

        Deleted (deletecollection): Deployments, ReplicaSets, DaemonSets, StatefulSets, PDBs (policy/v1beta1), Pods
        (grace 0, so they vanish at once), Events, Leases, ConfigMaps. Namespaces themselves are kept (they would never
        finish terminating without kube-controller-manager); RBAC objects are kept. Stop the simulator first, or it
        recreates what was deleted.
        """
        rest = self._admin_rest()
        skip = SYSTEM_NAMESPACES | set(keep_namespaces)
        for ns in self.namespaces():
            if ns in skip:
                continue
            for prefix, plural in RESET_COLLECTIONS:
                path = f"{prefix}/namespaces/{q(ns)}/{plural}"
                grace = 0 if plural == "pods" else None
                try:
                    rest.delete(path, grace_period_seconds=grace, propagationPolicy="Background")
                except ApiException as err:
                    if err.status not in (404, 405):
                        raise
        rest.delete("/api/v1/nodes", grace_period_seconds=0)
        self._finalize_terminating_namespaces(rest)
        # Pods with finalizers or left terminating: remove finalizers so they go too.
        for ns in self.namespaces():
            if ns in skip:
                continue
            for pod in rest.get(f"/api/v1/namespaces/{q(ns)}/pods").get("items", []):
                meta = pod["metadata"]
                path = f"/api/v1/namespaces/{q(ns)}/pods/{q(meta['name'])}"
                try:
                    if meta.get("finalizers"):
                        rest.patch(path, {"metadata": {"finalizers": None}})
                    rest.delete(path, grace_period_seconds=0)
                except ApiException as err:
                    if err.status != 404:
                        raise

    def _finalize_terminating_namespaces(self, rest: KubeRest) -> None:
        """Play the namespace controller for namespaces a test deleted: once emptied (above), drop the ``kubernetes``
        finalizer (``PUT /api/v1/namespaces/<ns>/finalize``) so they go; recreate ``default`` and ``node-manager``."""
        for ns in rest.get("/api/v1/namespaces").get("items", []):
            if not ns["metadata"].get("deletionTimestamp"):
                continue
            name = ns["metadata"]["name"]
            ns["spec"] = {"finalizers": []}
            try:
                rest.put(f"/api/v1/namespaces/{q(name)}/finalize", ns)
            except ApiException as err:
                if err.status not in (404, 409):
                    raise
        deadline = time.monotonic() + 5
        for name in ("default", AGENT_NAMESPACE):
            while True:
                try:
                    current = rest.get(f"/api/v1/namespaces/{q(name)}")
                except ApiException as err:
                    if err.status != 404:
                        raise
                    self._ensure_namespace(name)
                    break
                if not current["metadata"].get("deletionTimestamp") or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
