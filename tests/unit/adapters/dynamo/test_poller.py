"""Which invocation polls a run (adapters.dynamo.poller) on moto's DynamoDB: taken over only by a later budget, given
up only by its holder."""

from __future__ import annotations

from adapters.dynamo.poller import claim, give_up, poll_sk
from adapters.dynamo.store import Store

RUN = "20240301T000000Z-000002"


def test_the_invocation_whose_budget_ends_last_polls(store: Store) -> None:
    assert claim(store, RUN, "tick", 1000.0)
    assert claim(store, RUN, "tick", 1000.0)  # its own again
    assert not claim(store, RUN, "drain-result", 1000.0) and not claim(store, RUN, "drain-result", 900.0)
    assert claim(store, RUN, "launch", 1060.0)  # ends later: takes it over
    assert (store.get(poll_sk(RUN)) or {})["invocation"] == "launch"


def test_only_the_holder_gives_it_up(store: Store) -> None:
    claim(store, RUN, "launch", 1060.0)
    give_up(store, RUN, "tick")  # taken over from it: nothing to give up
    assert store.get(poll_sk(RUN)) is not None
    give_up(store, RUN, "launch")
    assert store.get(poll_sk(RUN)) is None
    assert claim(store, RUN, "tick", 10.0)  # free again
