"""``Store``: one cluster's items of the state table (its two partitions) with the item kinds most callers share.

``Store`` is ``Table`` (the low-level access) with the ``CMD#`` (``commands``), ``NODE#`` (``nodes``) and
``DETACH#`` (``detach``) operations. The other kinds take a ``Table`` (a ``Store`` is one): ``hooks`` (``HOOK#``),
``ledger`` (``COMP#``), ``runs`` (``RUN#``) and ``lock`` (``LOCK``).
"""

from __future__ import annotations

from adapters.dynamo.commands import CommandItems
from adapters.dynamo.detach import DetachItems
from adapters.dynamo.nodes import NodeItems


class Store(CommandItems, NodeItems, DetachItems):
    """Typed access to one cluster's items of the table (``Table``: the partition follows the item kind).

    Args:
        table: a boto3 ``dynamodb.Table`` resource (built by the entry point, so tests pass a local one).
        cluster: the cluster name.
    """
