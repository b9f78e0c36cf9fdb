"""Plays kubelet, scheduler and a few controllers for the local kube-apiserver, as kwok does.

No kubelet or controller-manager runs in the local world. ``ClusterSimulator`` keeps the cluster's Kubernetes side
consistent with moto's EC2 and with the workload objects, so the product's drain code meets the API behaviour it
meets in a real cluster:

- **cloud node lifecycle / kubelet registration**: a Node per running or pending EC2 instance tagged
  ``KubernetesCluster=<cluster>`` (kOps propagates the tag), named by private DNS name or instance id, with
  ``spec.providerID = aws:///<az>/<instance-id>`` and kOps' labels, marked Ready through the status subresource.
  The Node is deleted when its instance is shutting-down, terminated or gone (the cloud node controller does this).
- **scheduler**: binds unbound pods to the least loaded Ready, schedulable node whose labels match the pod's
  ``nodeSelector`` and whose taints it tolerates (node affinity is not evaluated).
- **ReplicaSet controller**: keeps ``spec.replicas`` live (not terminating) pods per ReplicaSet, with
  ownerReferences; scales down by deleting the surplus. A ReplicaSet annotated ``localworld.node-manager/prefer-node``
  gets its pods on that node while it is a candidate (for benchmarks that fill one node).
- **DaemonSet controller**: one pod per node whose labels match the template's ``nodeSelector`` and whose taints the
  template tolerates; cordoned (unschedulable) nodes keep theirs.
- **kubelet**: marks bound pods Running with Ready=True once their node is Ready; completes a graceful deletion
  (``deletionTimestamp`` set) by deleting with grace 0 once ``deletionGracePeriodSeconds`` have passed since the
  simulator saw it.
- **pod GC / garbage collector**: deletes pods of a Node that went away (grace 0), and pods, ReplicaSets whose
  controller owner is gone (after 2 s).
- **disruption controller**: keeps PodDisruptionBudget status (policy/v1beta1) current: ``currentHealthy``,
  ``desiredHealthy``, ``disruptionsAllowed``, ``expectedPods``, ``observedGeneration``, and prunes ``disruptedPods``
  (https://kubernetes.io/docs/concepts/workloads/pods/disruptions/). Without ``observedGeneration`` the Eviction
  API refuses every eviction. Updates use the PDB's resourceVersion (optimistic concurrency), as the real controller
  does, so a stale status never overwrites an eviction's decrement.

One module per part: ``objects`` (shared object helpers), ``informer`` (list + watch caches), ``base`` (the
controller base, a pass's view, hold-downs), ``pods`` (shared pod writes), ``nodes``, ``kubelet``, ``scheduler``,
``replicaset``, ``daemonset``, ``gc``, ``disruption``, and ``reconcile`` (``ClusterSimulator``, which runs them).

Speed: informers (list + watch) keep caches of Nodes, Pods, ReplicaSets, DaemonSets, Deployments and PDBs; every
change wakes one reconcile pass that works on the caches in memory and applies its writes concurrently; the simulator's
own writes go into the caches at once (newer resourceVersion wins), so a pass never acts twice on the same fact.
"""
