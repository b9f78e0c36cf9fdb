"""A real kube-apiserver (v1.20) + etcd on 127.0.0.1, started the envtest way, for the local test world.

Binaries come from ``KUBEBUILDER_ASSETS`` (default ``~/.cache/aws-node-manager/kube-assets``), built once by
``scripts/install-kube-assets.sh``. The API server serves TLS only (a throw-away CA signs its serving certificate),
authenticates two static tokens (``--token-auth-file``):

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
import ctypes
import datetime as dt
import ipaddress
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterable
from pathlib import Path

import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from localworld.rest import KubeRest, q

DEFAULT_ASSETS = Path("~/.cache/aws-node-manager/kube-assets").expanduser()
INSTALL_HINT = "run scripts/install-kube-assets.sh (it prints the folder to export as KUBEBUILDER_ASSETS)"

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


class KubeAssetsMissingError(RuntimeError):
    """etcd or kube-apiserver is not in the assets folder."""


class KubeStartError(RuntimeError):
    """etcd or kube-apiserver did not become ready before the deadline (the message holds the log's tail)."""


def die_with_parent() -> None:
    """preexec_fn: the child gets SIGKILL when the thread that spawned it exits (Linux ``PR_SET_PDEATHSIG``), so a
    killed test run leaves no etcd or kube-apiserver behind. Only used when spawning from the main thread."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
    except OSError:
        pass


OWNER_FILE = ".localworld-owner"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _claim(folder: Path) -> None:
    (folder / OWNER_FILE).write_text(str(os.getpid()))


def remove_stale_dirs() -> list[Path]:
    """Remove world folders (``/dev/shm/localworld-etcd-*``, ``$TMPDIR/localworld-kube-*``) whose owning process is
    dead (a run killed with SIGKILL cannot clean up). Returns the folders removed."""
    removed = []
    roots = {Path("/dev/shm"), Path(tempfile.gettempdir())}
    for root in roots:
        if not root.is_dir():
            continue
        for folder in list(root.glob("localworld-etcd-*")) + list(root.glob("localworld-kube-*")):
            owner = folder / OWNER_FILE
            try:
                pid = int(owner.read_text().strip())
            except (OSError, ValueError):
                continue  # not ours to judge (no owner file yet, or someone else's layout)
            if not _pid_alive(pid):
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder)
    return removed


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the kernel picked it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def find_assets(assets_dir: str | os.PathLike[str] | None = None) -> Path:
    """The folder holding ``etcd`` and ``kube-apiserver``: ``assets_dir``, else ``$KUBEBUILDER_ASSETS``, else
    ``~/.cache/aws-node-manager/kube-assets``.

    Raises:
        KubeAssetsMissingError: a binary is missing or not executable (the message says how to install them).
    """
    folder = Path(assets_dir or os.environ.get("KUBEBUILDER_ASSETS") or DEFAULT_ASSETS).expanduser()
    for binary in ("etcd", "kube-apiserver"):
        path = folder / binary
        if not (path.exists() and os.access(path, os.X_OK)):
            raise KubeAssetsMissingError(f"{path} not found or not executable; {INSTALL_HINT}")
    return folder


def _write_pki(folder: Path) -> None:
    """A CA, a serving certificate for 127.0.0.1/localhost signed by it, and the service-account RSA key."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    def key_pem(key: rsa.RSAPrivateKey) -> bytes:
        return key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
        )

    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    later = now + dt.timedelta(days=7)
    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localworld-ca")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(later)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    srv_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    srv_cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
        .issuer_name(ca_name)
        .public_key(srv_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(later)
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("localhost"),
                    x509.DNSName("kubernetes.default.svc"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                ]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (folder / "ca.crt").write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    (folder / "apiserver.crt").write_bytes(srv_cert.public_bytes(serialization.Encoding.PEM))
    (folder / "apiserver.key").write_bytes(key_pem(srv_key))
    (folder / "sa.key").write_bytes(key_pem(sa_key))
    for name in ("apiserver.key", "sa.key"):
        os.chmod(folder / name, 0o600)


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

    Raises (from ``start``):
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
        _claim(self.workdir)
        pki = self.workdir / "pki"
        pki.mkdir(exist_ok=True)
        _write_pki(pki)
        (self.workdir / "tokens.csv").write_text(
            f'{self.tokens["admin"]},admin,admin-uid,"system:masters"\n'
            f"{self.tokens['agent']},{AGENT_USER},agent-uid,"
            f'"system:serviceaccounts,system:serviceaccounts:{AGENT_NAMESPACE}"\n'
        )
        shm = Path("/dev/shm")
        self._etcd_dir = Path(tempfile.mkdtemp(prefix="localworld-etcd-", dir=shm if shm.is_dir() else None))
        _claim(self._etcd_dir)

        t0 = time.monotonic()
        print("[localworld] starting etcd ...", flush=True)
        etcd_port, peer_port = free_port(), free_port()
        etcd_url = f"http://127.0.0.1:{etcd_port}"
        self._etcd = self._spawn(
            "etcd",
            [
                str(self.assets / "etcd"),
                "--name=localworld",
                f"--data-dir={self._etcd_dir}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-cluster=localworld=http://127.0.0.1:{peer_port}",
                "--log-level=warn",
            ],
        )
        self._wait_http(f"{etcd_url}/health", self._etcd, "etcd", ssl_context=None)
        self.startup_seconds["etcd"] = time.monotonic() - t0
        print(f"[localworld] etcd ready in {self.startup_seconds['etcd']:.1f} s", flush=True)

        t1 = time.monotonic()
        print("[localworld] starting kube-apiserver ...", flush=True)
        port = free_port()
        self.url = f"https://127.0.0.1:{port}"
        self._apiserver = self._spawn(
            "kube-apiserver",
            [
                str(self.assets / "kube-apiserver"),
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={pki}",
                f"--tls-cert-file={pki / 'apiserver.crt'}",
                f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--token-auth-file={self.workdir / 'tokens.csv'}",
                f"--service-account-key-file={pki / 'sa.key'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                "--service-cluster-ip-range=10.96.0.0/16",
                "--authorization-mode=RBAC",
                # No controllers run: no token controller for ServiceAccount, no node lifecycle controller to lift the
                # not-ready taints TaintNodesByCondition would put on every new Node.
                "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
                "--allow-privileged=true",
                "--enable-priority-and-fairness=false",
                "--max-requests-inflight=1000",
                "--max-mutating-requests-inflight=500",
                "--v=0",
            ],
        )
        ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        self._wait_http(f"{self.url}/readyz", self._apiserver, "kube-apiserver", ssl_context=ctx)
        self.startup_seconds["kube-apiserver"] = time.monotonic() - t1
        print(f"[localworld] kube-apiserver ready in {self.startup_seconds['kube-apiserver']:.1f} s", flush=True)
        self._write_kubeconfig(self.kubeconfig, "admin", self.tokens["admin"])
        self._write_kubeconfig(self.agent_kubeconfig, "agent", self.tokens["agent"])
        self._ensure_namespace("default")
        self._ensure_namespace(AGENT_NAMESPACE)

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        log = open(self.workdir / f"{name}.log", "ab")  # noqa: SIM115 - the child keeps it open
        try:
            return subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=die_with_parent if threading.current_thread() is threading.main_thread() else None,
            )
        finally:
            log.close()

    def _log_tail(self, name: str, lines: int = 25) -> str:
        path = self.workdir / f"{name}.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def _wait_http(
        self, url: str, proc: subprocess.Popen[bytes], name: str, ssl_context: ssl.SSLContext | None
    ) -> None:
        deadline = time.monotonic() + self.start_timeout
        last = ""
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise KubeStartError(f"{name} exited with {proc.returncode}:\n{self._log_tail(name)}")
            try:
                req = urllib.request.Request(url, headers={"Authorization": f"Bearer {self.tokens['admin']}"})
                with urllib.request.urlopen(req, timeout=2, context=ssl_context) as resp:
                    if resp.status == 200:
                        return
            except Exception as err:  # noqa: BLE001 - not up yet: connection refused, 500 while hooks run
                last = str(err)
            time.sleep(0.1)
        raise KubeStartError(
            f"{name} not ready after {self.start_timeout:.0f} s (last: {last}):\n{self._log_tail(name)}"
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
                try:
                    client.close()
                except Exception:  # noqa: BLE001 - closing pools at shutdown
                    pass
            self._clients.clear()
            for proc in (self._apiserver, self._etcd):
                _terminate(proc)
            self._apiserver = None
            self._etcd = None
            if self._etcd_dir is not None:
                shutil.rmtree(self._etcd_dir, ignore_errors=True)
                self._etcd_dir = None
            if self._own_workdir and os.environ.get("LOCALWORLD_KEEP") != "1":
                shutil.rmtree(self.workdir, ignore_errors=True)
        try:
            atexit.unregister(self.stop)
        except Exception:  # noqa: BLE001
            pass

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


def _terminate(proc: subprocess.Popen[bytes] | None, grace: float = 5.0) -> None:
    if proc is None or proc.poll() is not None:
        if proc is not None:
            proc.wait()
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
