"""Which of the groups' InService instances have no membership record: ``gather`` asks EC2 for their launch times.

At 1,000 nodes that is a thousand look-ups of cold strings a tick (about 3 % of a quiet tick), although a quiet tick
reads the same membership (``NodeRecordMemo.by_instance`` answers the same map for the same read) and the same groups
(``GatherMemo.groups`` answers the same ``in_service`` tuple for an equal listing). ``UnregisteredMemo`` keeps each
group's answer with the two objects it was judged from and answers it again only for those very objects: both are the
memos' own (made from what was read, compared by content there) and never changed, and the memo holds them, so an
object seen again is the same content, never another one at a reused address.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import filterfalse

Judged = tuple[tuple[str, ...], tuple[str, ...]]  # a group's InService ids and those of them without a record


@dataclass
class UnregisteredMemo:
    """The last tick's map (``nodes``, held) and each group's ``Judged`` against it (``GatherMemo.unregistered``).

    Attributes:
        nodes: the map the last answers were judged against; None when there is none (only a map ``gather`` passes as
            never changed is kept).
        judged: group name -> its InService ids (the tuple itself) and the ids of them not in ``nodes``.
    """

    nodes: Mapping[str, object] | None = None
    judged: dict[str, Judged] = field(default_factory=dict)


def unregistered(
    memo: UnregisteredMemo, nodes: Mapping[str, object], kept: bool, in_service: list[tuple[str, tuple[str, ...]]]
) -> list[str]:
    """The ids of each ``(group, ids)`` of ``in_service`` not in ``nodes``, in order, group after group: exactly
    ``[i for _, ids in in_service for i in ids if i not in nodes]``. ``kept``: ``nodes`` is never changed (the
    membership memo's shared map): then the answers are kept in ``memo`` and a group's ids given as the same tuple as
    last time against the same map are answered as then; else nothing is kept."""
    before = memo.judged if kept and nodes is memo.nodes else {}
    judged: dict[str, Judged] = {}
    out: list[str] = []
    for name, ids in in_service:
        last = before.get(name)
        missing = last[1] if last is not None and last[0] is ids else tuple(filterfalse(nodes.__contains__, ids))
        judged[name] = (ids, missing)
        out.extend(missing)
    memo.nodes, memo.judged = (nodes, judged) if kept else (None, {})
    return out
