"""The local world's kube-apiserver and etcd as processes: finding the binaries, the PKI, spawning and readiness
waits, stopping, and cleaning up after runs that were killed.

Binaries come from ``KUBEBUILDER_ASSETS`` (default ``~/.cache/aws-node-manager/kube-assets``), built once by
``scripts/install-kube-assets.sh``. ``localworld.kube.KubeApiServer`` runs them.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime as dt
import ipaddress
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

DEFAULT_ASSETS = Path("~/.cache/aws-node-manager/kube-assets").expanduser()
INSTALL_HINT = "run scripts/install-kube-assets.sh (it prints the folder to export as KUBEBUILDER_ASSETS)"


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


def claim(folder: Path) -> None:
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


def write_pki(folder: Path) -> None:
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


# ---------------------------------------------------------------------- spawning and readiness
def spawn(name: str, argv: list[str], log_dir: Path) -> subprocess.Popen[bytes]:
    """Start ``argv`` in its own session, stdout and stderr appended to ``<log_dir>/<name>.log``; from the main thread
    the child also dies with this process (``die_with_parent``)."""
    log = open(log_dir / f"{name}.log", "ab")  # noqa: SIM115 - the child keeps it open
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


def log_tail(log_dir: Path, name: str, lines: int = 25) -> str:
    """The last ``lines`` lines of ``<log_dir>/<name>.log`` ("" when there is none)."""
    path = log_dir / f"{name}.log"
    if not path.exists():
        return ""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def wait_http(
    url: str,
    proc: subprocess.Popen[bytes],
    name: str,
    *,
    log_dir: Path,
    timeout: float,
    token: str,
    ssl_context: ssl.SSLContext | None,
) -> None:
    """Poll ``url`` (bearer ``token``) every 0.1 s until it answers 200.

    Raises:
        KubeStartError: ``proc`` exited, or no 200 within ``timeout`` seconds (the message holds the log's tail).
    """
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise KubeStartError(f"{name} exited with {proc.returncode}:\n{log_tail(log_dir, name)}")
        try:
            req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
            with urllib.request.urlopen(req, timeout=2, context=ssl_context) as resp:
                if resp.status == 200:
                    return
        except Exception as err:  # noqa: BLE001 - not up yet: connection refused, 500 while hooks run
            last = str(err)
        time.sleep(0.1)
    raise KubeStartError(f"{name} not ready after {timeout:.0f} s (last: {last}):\n{log_tail(log_dir, name)}")


def etcd_argv(assets: Path, data_dir: Path, client_port: int, peer_port: int) -> list[str]:
    """etcd's command line: one member named ``localworld`` on 127.0.0.1, plain HTTP, data in ``data_dir``."""
    etcd_url = f"http://127.0.0.1:{client_port}"
    return [
        str(assets / "etcd"),
        "--name=localworld",
        f"--data-dir={data_dir}",
        f"--listen-client-urls={etcd_url}",
        f"--advertise-client-urls={etcd_url}",
        f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
        f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
        f"--initial-cluster=localworld=http://127.0.0.1:{peer_port}",
        "--log-level=warn",
    ]


def apiserver_argv(assets: Path, etcd_url: str, port: int, pki: Path, token_file: Path) -> list[str]:
    """kube-apiserver's command line: TLS on 127.0.0.1:``port`` with the certificates of ``write_pki`` in ``pki``,
    static tokens from ``token_file``, RBAC, no admission plugin that needs a controller."""
    return [
        str(assets / "kube-apiserver"),
        f"--etcd-servers={etcd_url}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={pki}",
        f"--tls-cert-file={pki / 'apiserver.crt'}",
        f"--tls-private-key-file={pki / 'apiserver.key'}",
        f"--token-auth-file={token_file}",
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
    ]


def terminate(proc: subprocess.Popen[bytes] | None, grace: float = 5.0) -> None:
    """SIGTERM the process group of ``proc``, SIGKILL after ``grace`` s, and reap it. None or exited: only reap."""
    if proc is None or proc.poll() is not None:
        if proc is not None:
            proc.wait()
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
