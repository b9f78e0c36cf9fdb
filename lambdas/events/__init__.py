"""Parse the Lambdas' inputs into the one internal event type, ``lambdas.events.event.Event``.

One module per event kind (``spot``, ``rebalance``, ``lifecycle``, ``state_change``, ``launch_unsuccessful``,
``launch_successful``, ``scheduled``, ``agent_result``, ``node_ready``, ``request``), each opening with an example
payload;
``dispatch`` holds the one table keyed by (source, detail-type) and the single entry point, ``parse_event``.
"""
