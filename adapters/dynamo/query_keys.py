"""A Query's answer by sort key, for a membership read that applies only some of the items it read
(``adapters.dynamo.node_memo.NodeRecordMemo.patched``: ``fetch`` and ``listed``). Pure."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from operator import itemgetter
from typing import Any

_SK = itemgetter("sk")


def picked(
    items: Sequence[Mapping[str, Any]], keys: list[str], listed: Sequence[str] | None = None
) -> dict[str, Mapping[str, Any]]:
    """The items of ``items`` (one Query's answer: each sort key at most once) whose sort key is one of ``keys``, by
    sort key (a key with no item is absent): ``patched``'s ``fetch`` from a read made anyway. ``listed``: the items'
    sort keys, ``sort_keys(items)``, when the caller has them (``fetch_and_listed``): searched in C, no item read
    for its key.

    A Query answers in sort-key order, so each key is looked for by bisection first; a key not found that way (an
    item deleted, or an answer out of that order) is looked for in every item. With each key at most once, the
    answer is the same whatever the order."""
    found: dict[str, Mapping[str, Any]] = {}
    missing: set[str] = set()
    for sk in keys:
        at = bisect_left(items, sk, key=_sort_key) if listed is None else bisect_left(listed, sk)
        if at < len(items) and (_sort_key(items[at]) if listed is None else listed[at]) == sk:
            found[sk] = items[at]
        else:
            missing.add(sk)
    if missing:
        pairs = zip(map(_sort_key, items) if listed is None else listed, items, strict=True)
        found.update((sk, item) for sk, item in pairs if sk in missing)
    return found


def fetch_and_listed(
    items: Sequence[Mapping[str, Any]],
) -> tuple[Callable[[list[str]], dict[str, Mapping[str, Any]]], Callable[[], list[str]]]:
    """``patched``'s ``fetch`` (``picked``) and ``listed`` (``sort_keys``) over one Query's answer, the sort keys read
    once for both: ``patched`` asks ``listed`` on every patch, after ``fetch``, which then bisects those keys instead
    of reading ten items' keys a change (a cold item each at 1,000 nodes). The list is shared: never change it."""
    listed = cache(lambda: sort_keys(items))
    return (lambda keys: picked(items, keys, listed())), listed


def sort_keys(items: Sequence[Mapping[str, Any]]) -> list[str]:
    """The sort keys of ``items`` (a Query's answer), in its order, as ``str`` (``""`` for an item without one):
    ``patched``'s ``listed``, asked on every patched read, so read in C when every item has a string key (what a
    table whose sort key is of type S answers)."""
    try:
        keys = list(map(_SK, items))
    except (KeyError, TypeError):
        return list(map(_sort_key, items))
    return keys if not keys or set(map(type, keys)) == {str} else list(map(_sort_key, items))


def _sort_key(item: Mapping[str, Any]) -> str:
    return str(item.get("sk", ""))
