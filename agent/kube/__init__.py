"""The agent's Kubernetes adapter, the only part of the agent that imports ``kubernetes``.

- ``views``: typed read-only views of Nodes, Pods, Leases and watch events (pure);
- ``eviction``: the eviction subresource's answers, classified (pure);
- ``errors``: ``kube_error``, the one mapping of API and transport errors to ``core.exceptions``;
- ``watch``: open watches on pods and nodes;
- ``nodes``: paged node lists, the node watch, an instance's node (``NodeReads``, part of ``KubeAdapter``);
- ``nodeindex``: instance id -> node name, fed by the lists and the watch (the light cache a command's node is
  found through);
- ``raw``: the calls sent through ``ApiClient`` without the generated API classes (24 MiB of code);
- ``client``: ``KubeAdapter`` (the calls), ``make_api_client`` and ``kube_configuration``.
"""
