"""Which invocation polls a refresh run: the ``POLL#<run id>`` item.

Several invocations may advance one run at once (the tick, a drain result, a launch): each reads and decides on its
own, but polling for a wait (a spare to launch or become Ready) is worth doing once. The invocation that polls holds
the item::

    {"pk": "CLUSTER#<cluster>", "sk": "POLL#<run id>", "invocation": "<id>", "until": <epoch seconds>,
     "expires_at": <until + 1 day>}

``until`` is when its polling budget ends. Another invocation that reaches a wait worth polling takes the item over
only when its own budget ends later (it then polls, and the first one, seeing the item is no longer its own, returns);
otherwise it returns, leaving the polling to the holder. The holder deletes the item when it returns; one that
crashed leaves it to expire at ``until``. The sort key sits between ``NODE#`` and ``RUN#``, so the refresher's
snapshot read (``adapters.dynamo.snapshot``) returns it with no call of its own.
"""

from __future__ import annotations

from decimal import Decimal

from adapters.dynamo.table import Attr, Table
from core.exceptions import ConflictError

PREFIX = "POLL#"
EXPIRES_AFTER_SECONDS = 86400  # TTL (``expires_at``) of an item a crashed poller left behind


def poll_sk(run_id: str) -> str:
    return f"{PREFIX}{run_id}"


def claim(table: Table, run_id: str, invocation: str, until: float) -> bool:
    """Make ``invocation`` the run's poller until ``until`` (epoch seconds): one conditional PutItem that succeeds
    when nobody polls, the poller is ``invocation`` already, or the poller's budget ends before ``until``.

    Returns:
        False when another invocation polls and its budget ends no earlier.

    Raises:
        StoreUnavailableError: the write failed.
    """
    condition = Attr("pk").not_exists() | Attr("invocation").eq(invocation) | Attr("until").lt(Decimal(str(until)))
    try:
        item = {"invocation": invocation, "until": until, "expires_at": int(until) + EXPIRES_AFTER_SECONDS}
        table.put(poll_sk(run_id), item, condition=condition)
    except ConflictError:
        return False
    return True


def give_up(table: Table, run_id: str, invocation: str) -> None:
    """Delete the run's poller item if ``invocation`` still holds it (one conditional DeleteItem)."""
    try:
        table.delete(poll_sk(run_id), condition=Attr("invocation").eq(invocation))
    except ConflictError:
        return  # another invocation took it over: it is that one's now
