"""The in-memory cluster's controllers and workloads (``sim.kube_cluster`` holds the state and the scheduler):
Deployments as ReplicaSets ("ReplicaSet": https://kubernetes.io/docs/concepts/workloads/controllers/replicaset/:
as many active pods as replicas; a pod being deleted no longer counts, so its replacement is created at once),
DaemonSets ("DaemonSet": https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/: one pod per node),
PodDisruptionBudgets ("Specifying a Disruption Budget": https://kubernetes.io/docs/tasks/run-application/configure-pdb/)
and pods made by hand."""

from __future__ import annotations

from collections.abc import Mapping

from sim.kube_cluster import Cluster
from sim.kube_model import BudgetCounts, Deployment
from sim.kube_objects import Budget


class Workloads(Cluster):
    """``Cluster`` with its controllers (construction as ``Cluster``)."""

    # ------------------------------------------------------------------------------------------- workloads

    def add_deployment(
        self,
        namespace: str,
        name: str,
        replicas: int,
        *,
        labels: Mapping[str, str] | None = None,
        grace: int | None = None,
    ) -> None:
        """A Deployment (its ReplicaSet ``<name>-rs``) keeping ``replicas`` pods labelled ``app=<name>``."""
        key = f"{namespace}/{name}"
        self.deployments[key] = Deployment(namespace, name, replicas, {"app": name, **(labels or {})}, grace)
        self._selecting.pop(f"deploy:{key}", None)  # a Deployment made again may carry other labels: judged anew
        self._reconcile(key)

    def scale(self, namespace: str, name: str, replicas: int) -> None:
        self.deployments[f"{namespace}/{name}"].replicas = replicas
        self._reconcile(f"{namespace}/{name}")

    def add_daemonset(self, namespace: str, name: str, grace: int | None = None) -> None:
        """A DaemonSet: one pod on every node (Running and Ready at once)."""
        key = f"{namespace}/{name}"
        self.daemonsets[key] = grace
        for node in self.nodes:
            self._daemon_pod(key, node)

    def delete_daemonset(self, namespace: str, name: str) -> None:
        """The DaemonSet object goes; its pods stay as orphans (``--cascade=orphan``)."""
        self.daemonsets.pop(f"{namespace}/{name}", None)

    def add_budget(self, budget: Budget) -> None:
        """A PodDisruptionBudget (selecting existing and future pods of its namespace)."""
        key = f"{budget.namespace}/{budget.name}"
        self.budgets[key] = budget
        self.budget_counts[key] = BudgetCounts()
        self._index.add_budget(key, budget)
        self._selecting.clear()
        for group in map(self._alike.__getitem__, self._index.groups_for(key)):  # a group of alike pods: one answers
            first = next(iter(group.values()), None)
            if first is not None and self._selects(key, first):
                for pod, info in group.items():  # in no particular order: the counts are sums
                    if self.pods.get(pod) is info:  # (not a pod replaced by another of its name)
                        self._match(info, key)

    def add_pod(
        self,
        namespace: str,
        name: str,
        *,
        node: str = "",
        labels: Mapping[str, str] | None = None,
        owner: tuple[str, str] | None = None,
        grace: int | None = None,
        phase: str = "Running",
        ready: bool = True,
        emptydir: bool = False,
    ) -> str:
        """A pod made by hand (bare, a Job's, or one of a controller the cluster does not run), bound to ``node``
        when given. Returns its uid."""
        info = self._new_pod(namespace, name, dict(labels or {}), owner, grace, "")
        if emptydir:
            info.obj["spec"]["volumes"] = [{"name": "scratch", "emptyDir": {}}]
        if node:
            self._bind(info, node, phase=phase, ready=ready)
        else:
            self._account()
            self.pending[info.key] = None
            self._want_schedule()
        return str(info.obj["metadata"]["uid"])

    def _daemon_pod(self, ds: str, node: str) -> None:
        namespace, name = ds.split("/", 1)
        info = self._new_pod(
            namespace, f"{name}-{node}", {"app": name}, ("DaemonSet", name), self.daemonsets[ds], f"ds:{ds}"
        )
        self._bind(info, node, phase="Running", ready=True)

    def _reconcile(self, key: str) -> None:
        """The ReplicaSet controller: as many active (not terminating) pods as replicas."""
        dep = self.deployments.get(key)
        if dep is None:
            return
        if len(dep.active) > dep.replicas:
            for extra in reversed(list(dep.active)[dep.replicas :]):
                # an unbound pod, or one of no grace, goes at once and its removal reconciles again (``_remove``),
                # which may already have terminated the pods after it in this list
                if extra in dep.active and (info := self.pods.get(extra)) is not None:
                    self._terminate(info, None)
        for _ in range(dep.replicas - len(dep.active)):
            dep.made += 1
            name = f"{dep.name}-{dep.made:05d}"
            info = self._new_pod(
                dep.namespace, name, dict(dep.labels), ("ReplicaSet", f"{dep.name}-rs"), dep.grace, f"deploy:{key}"
            )
            dep.pods[info.key] = None
            dep.active[info.key] = None
            self._account()
            self.pending[info.key] = None
        self._want_schedule()
