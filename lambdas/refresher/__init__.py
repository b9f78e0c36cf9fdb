"""The refresher Lambda: weekly and on-demand rolling replacement of a kOps cluster's instances, surge first.

``triggers`` (what invoked it) → ``handler`` gathers the ``world`` → ``select`` (pure: which instances, the plan
table) and ``decide`` (pure: the next step of a ``core.runs.Run``) → ``execute`` (the one executor, dry-run there)
→ ``aws`` (the only AWS adapter).
"""
