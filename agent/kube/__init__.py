"""The agent's Kubernetes adapter, the only part of the agent that imports ``kubernetes``.

- ``views``: typed read-only views of Nodes, Pods, Leases and watch events (pure);
- ``eviction``: the eviction subresource's answers, classified (pure);
- ``errors``: ``kube_error``, the one mapping of API and transport errors to ``core.exceptions``;
- ``watch``: open watches on pods and nodes;
- ``client``: ``KubeAdapter`` (the calls), ``make_api_client`` and ``kube_configuration``.
"""
