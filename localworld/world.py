"""The whole local test world in one object: moto server + kube-apiserver/etcd + the cluster simulator + processes.

Typical use (tests get it from ``tests/conftest.py``'s fixtures)::

    with LocalWorld() as world:            # starts moto, etcd, kube-apiserver; applies the agent's RBAC
        info = world.setup_cluster()       # kOps cluster in moto, simulator running, nodes Ready
        agent = world.spawn("agent", log_path=tmp / "agent.log")
        ...
        world.reset()                      # empty world for the next test (processes killed, simulator stopped)
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, BinaryIO

from kubernetes import client as k8s

from localworld.aws import MotoServer, WorldSession, aws_env
from localworld.cluster import DEFAULT_AZS, ClusterInfo, create_kops_cluster
from localworld.kube import KubeApiServer
from localworld.kube_processes import die_with_parent
from localworld.rbac import apply_agent_rbac
from localworld.rest import KubeRest
from localworld.simulator.reconcile import ClusterSimulator

REPO_ROOT = Path(__file__).resolve().parent.parent


def say(message: str) -> None:
    print(f"[localworld] {message}", file=sys.stderr, flush=True)


class Spawned:
    """A child process in its own process group (``python -m <module>``), output to ``log_path``.

    ``kill()`` / ``terminate()`` signal the whole group, so grandchildren go too.
    """

    def __init__(self, argv: list[str], env: Mapping[str, str], log_path: Path, cwd: Path) -> None:
        self.argv = argv
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log: BinaryIO = open(log_path, "ab")  # noqa: SIM115 - closed by wait()
        self.proc = subprocess.Popen(
            argv,
            env=dict(env),
            cwd=str(cwd),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=die_with_parent if threading.current_thread() is threading.main_thread() else None,
        )
        self.started_at = time.monotonic()

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        return self.proc.poll()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _signal(self, sig: int) -> None:
        if self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):  # it exited since poll()
            os.killpg(self.proc.pid, sig)

    def terminate(self) -> None:
        """SIGTERM to the process group (a graceful stop)."""
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL to the process group (a crash: no cleanup runs)."""
        self._signal(signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> int:
        """Wait for exit; returns the exit code. Raises ``subprocess.TimeoutExpired`` after ``timeout`` s."""
        code = self.proc.wait(timeout)
        self._log.close()
        return code

    def stop(self, grace: float = 5.0) -> int:
        """SIGTERM, then SIGKILL after ``grace`` seconds; waits for exit."""
        self.terminate()
        try:
            return self.wait(grace)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.wait()

    def output(self) -> str:
        """Everything the process wrote so far."""
        self._log.flush()
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


class LocalWorld:
    """moto server + kube-apiserver/etcd (+ a ClusterSimulator and spawned processes once used).

    Args:
        region: AWS region of every client and of the spawned processes' environment.
        assets_dir, workdir: passed to ``KubeApiServer``.
        log_dir: where ``spawn`` puts logs by default (default: ``<workdir>/logs``).

    Attributes:
        moto: the ``MotoServer``; ``kube``: the ``KubeApiServer``; ``simulator``: the running ``ClusterSimulator``
        or None; ``cluster``: the last ``ClusterInfo`` from ``setup_cluster`` or None; ``timings``: seconds taken by
        ``start``, the last ``reset`` and the last ``setup_cluster``.
    """

    def __init__(
        self,
        region: str = "us-east-1",
        assets_dir: str | os.PathLike[str] | None = None,
        workdir: str | os.PathLike[str] | None = None,
        log_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        self.region = region
        self.moto = MotoServer(region=region)
        self.kube = KubeApiServer(assets_dir=assets_dir, workdir=workdir)
        self.log_dir = Path(log_dir) if log_dir else self.kube.workdir / "logs"
        self.simulator: ClusterSimulator | None = None
        self.cluster: ClusterInfo | None = None
        self.timings: dict[str, float] = {}
        self._spawned: list[Spawned] = []
        self._api: k8s.ApiClient | None = None
        self._agent_api: k8s.ApiClient | None = None
        self._session: WorldSession | None = None
        self._started = False
        self._prev_sigterm: Any = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> LocalWorld:
        """Start moto and the Kubernetes API (etcd, kube-apiserver), then apply the agent's RBAC. Idempotent."""
        if self._started:
            return self
        t0 = time.monotonic()
        atexit.register(self.stop)
        self._install_sigterm()
        try:
            self.moto.start()
            say(f"moto server at {self.moto.endpoint_url}")
            # moto builds each service's backend on first use (seconds for EC2): do it while kube-apiserver starts
            warm = threading.Thread(target=self._warm_up, name="moto-warm-up", daemon=True)
            warm.start()
            self.kube.start()
            warm.join(60)
            self._session = self.moto.session()
            self._api = self.kube.api_client("admin")
            self._agent_api = self.kube.api_client("agent")
            apply_agent_rbac(KubeRest(self._api))
        except BaseException:
            self.stop()
            raise
        self._started = True
        self.timings["start"] = time.monotonic() - t0
        say(f"world started in {self.timings['start']:.1f} s")
        return self

    def _warm_up(self) -> None:
        try:
            self.moto.warm_up()
        except Exception as err:  # noqa: BLE001 - only an optimisation
            say(f"moto warm-up failed: {err}")

    def _install_sigterm(self) -> None:
        """Turn SIGTERM into SystemExit so cleanup (fixtures, atexit) runs; main thread only, default handler only."""
        if threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return

        def on_sigterm(signum: int, frame: Any) -> None:
            raise SystemExit(128 + signum)

        self._prev_sigterm = signal.signal(signal.SIGTERM, on_sigterm)

    def stop(self) -> None:
        """Kill spawned processes, stop the simulator, kube-apiserver + etcd and moto. Safe to call twice."""
        self.stop_processes()
        self.stop_simulator()
        self.kube.stop()
        self.moto.stop()
        self._started = False
        with contextlib.suppress(Exception):  # at interpreter exit atexit may already be torn down
            atexit.unregister(self.stop)
        if self._prev_sigterm is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._prev_sigterm)
            self._prev_sigterm = None

    def __enter__(self) -> LocalWorld:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def reset(self) -> None:
        """An empty world: processes killed, simulator stopped, every moto resource gone, Kubernetes emptied.

        Kubernetes keeps its namespaces (a namespace a test deleted is finalized and goes) and the agent's RBAC
        (re-applied from ``agent/deploy/rbac``); see ``KubeApiServer.reset``.
        """
        t0 = time.monotonic()
        self.stop_processes()
        self.stop_simulator()
        self.moto.reset()
        self.kube.reset()
        apply_agent_rbac(KubeRest(self.api))  # in case a test changed it
        self.cluster = None
        self.timings["reset"] = time.monotonic() - t0

    def started_pids(self) -> list[int]:
        """Process ids of what this world runs now: spawned processes, kube-apiserver and etcd (to check, after
        ``stop``, that none is left)."""
        kube = [proc.pid for proc in (self.kube._apiserver, self.kube._etcd) if proc is not None]
        return [p.pid for p in self._spawned] + kube

    def stop_processes(self) -> None:
        """SIGKILL every process ``spawn`` started (whole process groups) and wait for them."""
        while self._spawned:
            proc = self._spawned.pop()
            proc.kill()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                say(f"process {proc.pid} ({' '.join(proc.argv)}) did not die after SIGKILL")

    def running_simulator(self) -> ClusterSimulator:
        """The simulator ``setup_cluster`` started.

        Raises:
            RuntimeError: no cluster is set up (or the simulator was stopped).
        """
        if self.simulator is None:
            raise RuntimeError("the simulator is not running: call setup_cluster() first")
        return self.simulator

    def stop_simulator(self) -> None:
        if self.simulator is not None:
            self.simulator.stop()
            self.simulator = None

    # ------------------------------------------------------------------ clients
    @property
    def session(self) -> WorldSession:
        """boto3 session helper bound to the moto server (``.client(name)``, ``.resource(name)``)."""
        if self._session is None:
            self._session = self.moto.session()
        return self._session

    def client(self, service: str) -> Any:
        return self.session.client(service)

    def resource(self, service: str) -> Any:
        return self.session.resource(service)

    @property
    def api(self) -> k8s.ApiClient:
        """Admin ``kubernetes.client.ApiClient`` (group system:masters)."""
        if self._api is None:
            raise RuntimeError("LocalWorld not started")
        return self._api

    @property
    def agent_api(self) -> k8s.ApiClient:
        """``ApiClient`` authenticated as the agent (only the agent's RBAC)."""
        if self._agent_api is None:
            raise RuntimeError("LocalWorld not started")
        return self._agent_api

    @property
    def core(self) -> k8s.CoreV1Api:
        return k8s.CoreV1Api(self.api)

    @property
    def rest(self) -> KubeRest:
        """Raw JSON client, admin (reaches policy/v1beta1 PDBs)."""
        return KubeRest(self.api)

    @property
    def kubeconfig(self) -> Path:
        return self.kube.kubeconfig

    @property
    def agent_kubeconfig(self) -> Path:
        return self.kube.agent_kubeconfig

    # ------------------------------------------------------------------ cluster
    def setup_cluster(
        self,
        *,
        name: str = "demo.k8s.local",
        azs: Iterable[str] = DEFAULT_AZS,
        nodes_per_az: int = 3,
        spot: bool = True,
        node_naming: str = "dns",
        join_delay: float = 0.0,
        wait_ready: bool = True,
        timeout: float = 30.0,
        **cluster_kwargs: Any,
    ) -> ClusterInfo:
        """Create the kOps cluster in moto (``create_kops_cluster``), start the simulator, wait for Ready nodes.

        Args:
            node_naming, join_delay: ``ClusterSimulator`` options.
            wait_ready: wait for ``len(azs) * (1 + nodes_per_az)`` Ready nodes (masters + workers).
            cluster_kwargs: more ``create_kops_cluster`` keywords (table and queue names...).

        Raises:
            TimeoutError: the nodes were not Ready within ``timeout`` seconds.
        """
        t0 = time.monotonic()
        azs = tuple(azs)
        self.stop_simulator()
        info = create_kops_cluster(
            self.session,
            name=name,
            azs=azs,
            nodes_per_az=nodes_per_az,
            spot=spot,
            region=self.region,
            **cluster_kwargs,
        )
        self.cluster = info
        self.simulator = ClusterSimulator(
            self.session.client("ec2"),
            self.kube.api_client("admin"),
            info.name,
            node_naming=node_naming,
            join_delay=join_delay,
        ).start()
        if wait_ready:
            expected = len(azs) * (1 + nodes_per_az)
            self.simulator.nodes_ready(expected, timeout)
        self.timings["setup_cluster"] = time.monotonic() - t0
        say(f"cluster {info.name} ready in {self.timings['setup_cluster']:.1f} s")
        return info

    # ------------------------------------------------------------------ processes
    def env(self, extra: Mapping[str, str] | None = None, *, kubeconfig: str = "agent") -> dict[str, str]:
        """Environment for a subprocess: the parent's PATH/HOME/LANG, moto (``aws_env``), ``KUBECONFIG`` (the agent's
        by default, or ``"admin"``), the cluster's settings (``ClusterInfo.env``), ``PYTHONPATH`` = repo root, then
        ``extra``."""
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TZ")}
        env.update(aws_env(self.moto.endpoint_url, self.region))
        env["KUBECONFIG"] = str(self.agent_kubeconfig if kubeconfig == "agent" else self.kubeconfig)
        if self.cluster is not None:
            env.update(self.cluster.env())
        env["PYTHONPATH"] = str(REPO_ROOT)
        env["PYTHONUNBUFFERED"] = "1"
        # processes of the world share one host (pods would not): each agent's probe/metrics port is a free one
        env["AGENT_HTTP_PORT"] = "0"
        env.update(extra or {})
        return env

    def spawn(
        self,
        module: str,
        env_overrides: Mapping[str, str] | None = None,
        log_path: str | os.PathLike[str] | None = None,
        *,
        args: Iterable[str] = (),
        kubeconfig: str = "agent",
    ) -> Spawned:
        """Start ``python -m <module> [args]`` with ``env(env_overrides)`` in its own process group.

        Killed (SIGKILL) by ``reset``/``stop``/``stop_processes``. Output goes to ``log_path`` (default
        ``<log_dir>/<module>-<n>.log``).
        """
        path = Path(log_path) if log_path else self.log_dir / f"{module}-{len(self._spawned)}.log"
        proc = Spawned(
            [sys.executable, "-m", module, *args],
            self.env(env_overrides, kubeconfig=kubeconfig),
            path,
            REPO_ROOT,
        )
        self._spawned.append(proc)
        return proc
