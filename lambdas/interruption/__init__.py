"""The interruption Lambda: Spot interruption warnings and rebalance recommendations -> drain commands.

Flow (one module each): ``lambdas.events`` parses the event into an ``Event``; ``aws`` and the store
read what AWS and the table say about the instance (``world``); ``decide`` turns notice + world into a ``Plan``
(pure); ``execute`` applies the plan; ``handler`` wires settings, clients, logging, metrics and idempotency.
"""
