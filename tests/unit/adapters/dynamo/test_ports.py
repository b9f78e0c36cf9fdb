"""The table adapters satisfy the ports their callers depend on (checked by mypy; asserted here at run time too)."""

from adapters.dynamo.lock import LeaseLock
from adapters.dynamo.ports import ClusterLock, CommandStore, DetachStore, ItemReader, NodeStore, RunRepository
from adapters.dynamo.runs import RunStore
from adapters.dynamo.store import Store


def test_the_adapters_implement_their_ports(store: Store) -> None:
    as_commands: CommandStore = store
    as_nodes: NodeStore = store
    as_detach: DetachStore = store
    as_reader: ItemReader = store
    runs: RunRepository = RunStore(store)
    lock: ClusterLock = LeaseLock(store)
    assert all(x is not None for x in (as_commands, as_nodes, as_detach, as_reader, runs, lock))
